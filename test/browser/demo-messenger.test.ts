import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS, type ContextOptions, demoSuite, PHONE } from './demo-suite.js';
import { openRowMenu, openTools, row, seed } from './demo-ui.js';
import { layoutProblems } from './layout.js';

/**
 * The demo page as a messenger, at desktop (1280×800) and phone (390×844) width in real
 * Chromium: the chat list sorted by last activity with its time, no action buttons until a row's
 * menu opens, the test tools folded behind one button, a conversation that opens (its messages
 * and read state) and is read by opening it, on this device and the other. Facts are asserted
 * on the DOM and boxes; the screenshots go to test-artifacts/ for a person to look at.
 */
const UID = 'alice';
const DESKTOP = { viewport: { width: 1280, height: 800 } };
/** The seed's conversations, most recently active first (its script spaces them so; product-launch's topics are inside its entry). */
const SEEDED = ['dm:alice:bob', 'design-team', 'product-launch', 'release-train', 'announcements', 'random'];
/** What a row's time may read: minutes or hours ago, yesterday, a weekday, a date. */
const RELATIVE = /^(now|\d{1,2} min|\d{1,2} h|Yesterday|Mon|Tue|Wed|Thu|Fri|Sat|Sun|\d{1,2} [A-Z][a-z]{2})$/;

const suite = demoSuite();
const pageErrors = suite.pageErrors;
const open = async (device: string, options: ContextOptions): Promise<Page> => (await suite.open(UID, device, options)).page;

const listed = async (page: Page): Promise<string[]> =>
  Promise.all((await page.locator('#conversations > li[data-conv]').all()).map(async (r) => (await r.getAttribute('data-conv')) ?? ''));

/** What has the keyboard focus, by the page's focus key (`menu:row:<conv>`, `item:row:<conv>:<i>`); a string script: this type-check has no DOM. */
const focused = (page: Page): Promise<string | null> => page.evaluate('document.activeElement && document.activeElement.getAttribute("data-focus")');

/** Each row's last-activity time: what it reads and the instant it stands for. */
const times = async (page: Page): Promise<Array<{ text: string; at: number }>> =>
  Promise.all(
    (await page.locator('#conversations > li[data-conv] > .conv-open [data-role="time"]').all()).map(async (t) => ({
      text: (await t.textContent()) ?? '',
      at: Date.parse((await t.getAttribute('datetime')) ?? ''),
    })),
  );

/** The chat list as a product shows it: by last activity with its time, no action buttons at rest, the tools folded away. */
async function expectChatList(page: Page): Promise<void> {
  // Every row timed (the record may arrive after the counts), in the seed's order.
  await expect
    .poll(async () => ({ order: await listed(page), timed: (await times(page)).length }), { timeout: 15_000 })
    .toEqual({ order: SEEDED, timed: SEEDED.length });
  const shown = await times(page);
  expect(shown.map((t) => t.text)).toEqual(SEEDED.map(() => expect.stringMatching(RELATIVE)));
  for (const [i, t] of shown.entries()) {
    expect(Number.isFinite(t.at), `row ${SEEDED[i]} has a time`).toBe(true);
    if (i > 0) expect(t.at, `row ${SEEDED[i]} is not newer than the one above`).toBeLessThanOrEqual(shown[i - 1]?.at ?? 0);
  }
  expect(await page.locator('#conversations [role="menuitem"]:visible, #conversations [role="menuitemradio"]:visible').count()).toBe(0);
  for (const action of ['read', 'mark-unread', 'level', 'delete']) {
    expect(await page.locator(`#conversations button[data-action="${action}"]:visible`).count(), action).toBe(0);
  }
  expect(await page.locator('#tools').isVisible()).toBe(false);
  expect(await page.locator('#tools-toggle').getAttribute('aria-expanded')).toBe('false');
  expect(await layoutProblems(page)).toEqual([]);
}

describe('the demo as a messenger', () => {
  let desktop: Page;

  it('desktop 1280×800: tools behind a button, a sorted list with times, a menu per row, a conversation that opens and is read', async () => {
    desktop = await open('D', DESKTOP);
    const other = await open('E', DESKTOP);
    // The tools are folded away until their button is pressed; the seed is in them.
    expect(await desktop.locator('#tools').isVisible()).toBe(false);
    expect(await desktop.locator('#seed').isVisible()).toBe(false);
    await openTools(desktop);
    expect(await desktop.locator('#tools-toggle').getAttribute('aria-expanded')).toBe('true');
    await seed(desktop);
    await desktop.screenshot({ path: join(ARTIFACTS, 'messenger-1280-tools.png') });
    await desktop.keyboard.press('Escape');
    await desktop.locator('#tools').waitFor({ state: 'hidden' });

    await expectChatList(desktop);
    await expectChatList(other);
    await desktop.mouse.move(0, 0);
    await desktop.screenshot({ path: join(ARTIFACTS, 'messenger-1280.png') });

    // A row's menu from the keyboard: Tab from the row to its trigger (shown once the row has the
    // focus), Enter opens it; its items are menu items; Escape closes it and gives the focus back.
    const trigger = row(desktop, 'design-team').locator('button[data-action="menu"]');
    expect(await trigger.isVisible()).toBe(false);
    await row(desktop, 'design-team').locator('[data-action="open"]').focus();
    await desktop.keyboard.press('Tab');
    expect(await focused(desktop)).toBe('menu:row:design-team');
    await desktop.keyboard.press('Enter');
    const menu = row(desktop, 'design-team').locator('[role="menu"]');
    await menu.waitFor({ state: 'visible' });
    expect(await trigger.getAttribute('aria-expanded')).toBe('true');
    expect(await trigger.getAttribute('aria-haspopup')).toBe('menu');
    expect(await menu.locator('[role="menuitem"], [role="menuitemradio"]').allTextContents()).toEqual([
      'Mark as read',
      'All',
      'Mentions only',
      'None (muted)',
      'Delete',
    ]);
    expect(await desktop.locator('#conversations [role="menu"]:visible').count()).toBe(1);
    expect(await focused(desktop)).toBe('item:row:design-team:0');
    await desktop.keyboard.press('ArrowDown');
    expect(await focused(desktop)).toBe('item:row:design-team:1');
    expect(await layoutProblems(desktop)).toEqual([]);
    await desktop.screenshot({ path: join(ARTIFACTS, 'messenger-1280-row-menu.png') });
    await desktop.keyboard.press('Escape');
    await menu.waitFor({ state: 'hidden' });
    expect(await trigger.getAttribute('aria-expanded')).toBe('false');
    expect(await focused(desktop)).toBe('menu:row:design-team');

    // Opening design-team (6 unread, a mention): its view shows what Redpoint knows, and opening reads it.
    expect(await row(desktop, 'design-team').getAttribute('data-unread')).toBe('6');
    await row(desktop, 'design-team').locator('[data-action="open"]').click();
    const pane = desktop.locator('#conversation');
    await pane.waitFor({ state: 'visible' });
    expect(await pane.locator('[data-role="title"]').textContent()).toBe('design-team');
    // The messages the tools sent, oldest first, the ones unread before opening under a "new" divider.
    expect(await pane.locator('[data-role="message"]').count()).toBe(6);
    expect(await pane.locator('[data-role="message"]').last().getAttribute('data-seq')).toBe('6');
    expect(await pane.locator('[data-role="new-divider"]').textContent()).toBe('6 new messages');
    expect(await pane.locator('[data-role="message"][data-mention="true"]').count()).toBe(1);
    await expect.poll(() => pane.locator('[data-role="read-state"]').textContent()).toBe('Read up to #6 of #1–#6');
    await expect.poll(() => row(desktop, 'design-team').getAttribute('data-unread')).toBe('0');
    expect(await row(desktop, 'design-team').getAttribute('aria-current')).toBe('true');
    await expect.poll(() => row(other, 'design-team').getAttribute('data-unread'), { timeout: 10_000 }).toBe('0');
    await expect.poll(async () => (await suite.h.unread(UID)).conversations.find((c) => c.conv === 'design-team')?.unread).toBe(0);
    expect(await layoutProblems(desktop)).toEqual([]);
    await desktop.mouse.move(0, 0);
    await desktop.screenshot({ path: join(ARTIFACTS, 'messenger-1280-conversation.png') });
    // The README's picture (docs/demo.png) is refreshed on request only, so a test run leaves the tree clean.
    if (process.env.UPDATE_DOCS_SCREENSHOT === '1') await desktop.screenshot({ path: join('docs', 'demo.png') });

    // "Mark unread from here" on message #4 (shown on a read message's bubble when pointed at):
    // #4 to #6 are unread again, here and on the other device, and the divider moves there.
    const fourth = pane.locator('[data-role="message"][data-seq="4"]');
    await fourth.hover();
    await fourth.locator('button[data-action="unread-from"]').click();
    await expect.poll(() => pane.locator('[data-role="read-state"]').textContent()).toBe('Read up to #3 of #1–#6');
    expect(await pane.locator('[data-role="new-divider"]').textContent()).toBe('3 new messages');
    await expect.poll(() => row(desktop, 'design-team').getAttribute('data-unread')).toBe('3');
    await expect.poll(() => row(other, 'design-team').getAttribute('data-unread'), { timeout: 10_000 }).toBe('3');
    await expect.poll(async () => (await suite.h.unread(UID)).conversations.find((c) => c.conv === 'design-team')?.readSeq).toBe(3);
    await desktop.screenshot({ path: join(ARTIFACTS, 'messenger-1280-unread-from.png') });
    expect(pageErrors).toEqual([]);
  });

  it('phone 390×844: the same list, a conversation on a screen of its own, read there and on the other device', async () => {
    const phone = await open('P', PHONE);
    await expectChatList(phone);
    // On a phone each row's one control is its menu trigger.
    expect(await row(phone, 'random').locator('button:visible').count()).toBe(2);
    expect(await row(phone, 'random').locator('button[data-action="menu"]').isVisible()).toBe(true);
    await phone.screenshot({ path: join(ARTIFACTS, 'messenger-390.png') });
    await openRowMenu(phone, 'random');
    expect(await layoutProblems(phone)).toEqual([]);
    await phone.screenshot({ path: join(ARTIFACTS, 'messenger-390-row-menu.png') });
    await phone.keyboard.press('Escape');
    await openTools(phone);
    await phone.screenshot({ path: join(ARTIFACTS, 'messenger-390-tools.png') });
    await phone.locator('#tools-close').click();
    await phone.locator('#tools').waitFor({ state: 'hidden' });

    expect(await row(phone, 'release-train').getAttribute('data-unread')).toBe('3');
    await row(phone, 'release-train').locator('[data-action="open"]').click();
    const pane = phone.locator('#conversation');
    await pane.waitFor({ state: 'visible' });
    // The conversation takes the screen: the list is gone until Back.
    expect(await phone.locator('#conversations').isVisible()).toBe(false);
    expect(await pane.locator('[data-role="message"]').count()).toBe(3);
    await expect.poll(() => pane.locator('[data-role="read-state"]').textContent()).toBe('Read up to #3 of #1–#3');
    await expect.poll(() => row(desktop, 'release-train').getAttribute('data-unread'), { timeout: 10_000 }).toBe('0');
    expect(await layoutProblems(phone)).toEqual([]);
    await phone.screenshot({ path: join(ARTIFACTS, 'messenger-390-conversation.png') });

    // Its menu marks it unread again: the dot shows on the other device too.
    await pane.locator('button[data-action="menu"]').click();
    await pane.locator('[role="menu"] button[data-action="mark-unread"]').click();
    await row(desktop, 'release-train').locator('[data-role="marked"]').waitFor({ timeout: 10_000 });
    await pane.locator('button[data-action="back"]').click();
    await phone.locator('#conversations').waitFor({ state: 'visible' });
    expect(await pane.isVisible()).toBe(false);
    await row(phone, 'release-train').locator('[data-role="marked"]').waitFor();
    expect(pageErrors).toEqual([]);
  });
});
