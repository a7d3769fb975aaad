import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { expectWithin } from '../helpers/bound.js';
import { ARTIFACTS, type ContextOptions, demoSuite, PHONE } from './demo-suite.js';
import { openRowMenu, openTools, row, rowAction, seed } from './demo-ui.js';
import { layoutProblems } from './layout.js';

/**
 * The demo page as a chat list, in real Chromium against a real dev-mode server: one order on
 * every device of a user, offline shown at once, "From" someone else, no chat with yourself,
 * the row actions behind one control on a phone, a "Mark as unread" that toggles, subtitles that
 * read like a chat list. Each device is a browser context of its own (own storage, own socket).
 */
const DESKTOP = { viewport: { width: 1200, height: 780 } };

/**
 * Page scripts (strings: this project's type-check has no DOM): the first arms a timer from the
 * browser's `offline` event to the connection badge showing offline (void: evaluate would await
 * the promise); the second reads it.
 */
const TIME_OFFLINE_BADGE = `void (window.offlineShownAfter = new Promise((resolve) => {
  window.addEventListener('offline', () => {
    const at = performance.now();
    const badge = document.querySelector('#connection');
    const check = () => {
      if (!badge || badge.getAttribute('data-state') !== 'offline') return false;
      resolve(performance.now() - at);
      return true;
    };
    if (check()) return;
    const watcher = new MutationObserver(() => { if (check()) watcher.disconnect(); });
    if (badge) watcher.observe(badge, { attributes: true });
  }, { once: true });
}))`;
const OFFLINE_BADGE_AFTER = `Promise.race([
  window.offlineShownAfter,
  new Promise((_, reject) => setTimeout(() => reject(new Error('the browser never fired its offline event')), 10000)),
])`;

const suite = demoSuite();
afterAll(() => {
  expect(suite.pageErrors).toEqual([]);
});
const open = (uid: string, device: string, options: ContextOptions = DESKTOP): Promise<{ page: Page; context: BrowserContext }> =>
  suite.open(uid, device, options);

/** The conversation ids in the order the page lists them. */
const listed = async (page: Page): Promise<string[]> =>
  Promise.all((await page.locator('#conversations > li[data-conv]').all()).map(async (r) => (await r.getAttribute('data-conv')) ?? ''));

describe('the demo as a chat list', () => {
  it('two devices of one user, and one opened later, list the conversations in one order: by last activity, then id', async () => {
    for (const conv of ['c-alpha', 'c-beta', 'c-gamma', 'c-delta']) await suite.h.members(conv, { add: ['olga', 'pete'], category: 'group' });
    const { page: a } = await open('olga', 'A');
    const { page: b } = await open('olga', 'B');
    await expect.poll(() => listed(a)).toEqual(['c-alpha', 'c-beta', 'c-delta', 'c-gamma']);
    // Messages land in this order while both watch: most recent first on both.
    for (const conv of ['c-gamma', 'c-alpha', 'c-delta']) {
      await suite.h.post({ conv, seq: 1, sender: 'pete' });
      await expect.poll(() => row(a, conv).getAttribute('data-unread')).toBe('1');
      await expect.poll(() => row(b, conv).getAttribute('data-unread')).toBe('1');
    }
    const expected = ['c-delta', 'c-alpha', 'c-gamma', 'c-beta'];
    await expect.poll(() => listed(a), { timeout: 10_000 }).toEqual(expected);
    await expect.poll(() => listed(b), { timeout: 10_000 }).toEqual(expected);
    // A device that was not there when it happened shows the same order.
    const { page: c } = await open('olga', 'C');
    await expect.poll(() => listed(c), { timeout: 10_000 }).toEqual(expected);
    // Reading changes no order; a new message moves its conversation up everywhere.
    await rowAction(a, 'c-alpha', 'read');
    await suite.h.post({ conv: 'c-beta', seq: 1, sender: 'pete' });
    const after = ['c-beta', 'c-delta', 'c-alpha', 'c-gamma'];
    for (const page of [a, b, c]) await expect.poll(() => listed(page), { timeout: 10_000 }).toEqual(after);
  });

  it('going offline shows within 1 s, and live again when the network is back', async () => {
    await suite.h.members('net', { add: ['nina', 'pete'], category: 'group' });
    const { page, context } = await open('nina', 'N');
    // Timed inside the page, from the browser's own `offline` event to the badge changing, so the
    // figure is the demo's reaction and not the DevTools round trips of a loaded machine.
    await page.evaluate(TIME_OFFLINE_BADGE);
    const started = Date.now();
    await context.setOffline(true);
    await page.locator('#connection[data-state="offline"]').waitFor({ timeout: 10_000 });
    const inPage = Number(await page.evaluate(OFFLINE_BADGE_AFTER));
    console.log(`offline shown ${Math.round(inPage)} ms after the browser's offline event, ${Date.now() - started} ms after setOffline`);
    expectWithin('offline shown after the offline event', inPage, 1000);
    expect(await page.locator('#connection-text').textContent()).toMatch(/Offline|Connecting/);
    await context.setOffline(false);
    await page.locator('#connection[data-state="live"]').waitFor({ timeout: 15_000 });
  });

  it('seeded on one user\'s page: the private chat is named after the other person on each side, never after yourself; "From" is someone else, so Send shows', async () => {
    const { page: alice } = await open('alice', 'S');
    await openTools(alice);
    await seed(alice);
    await alice.locator('#conversations li[data-conv="dm:alice:bob"]').waitFor({ timeout: 15_000 });
    expect(await row(alice, 'dm:alice:bob').locator('[data-role="name"]').textContent()).toBe('bob');

    const { page: bob } = await open('bob', 'S');
    await row(bob, 'dm:alice:bob').waitFor({ timeout: 15_000 });
    expect(await row(bob, 'dm:alice:bob').locator('[data-role="name"]').textContent()).toBe('alice');
    const names = await bob.locator('#conversations [data-role="name"]').allTextContents();
    expect(names).not.toContain('bob');

    // On bob's page "From" is a member who is not bob, and a message from them counts for bob.
    await openTools(bob);
    await bob.locator('#send-conv').selectOption('dm:alice:bob');
    await expect.poll(() => bob.locator('#send-form input[name="sender"]').inputValue()).toBe('alice');
    const before = Number(await row(bob, 'dm:alice:bob').getAttribute('data-unread'));
    await bob.locator('#send-form button[type="submit"]').click();
    await expect.poll(() => row(bob, 'dm:alice:bob').getAttribute('data-unread')).toBe(String(before + 1));
    await bob.locator('#send-conv').selectOption('design-team');
    await expect.poll(() => bob.locator('#send-form input[name="sender"]').inputValue()).not.toBe('bob');
    expect(await bob.locator('#send-form input[name="sender"]').inputValue()).not.toBe('');
  });

  it('subtitles read like a chat list', async () => {
    await suite.h.members('subs', { add: ['sara', 'pete'], category: 'group' });
    await suite.h.members('quiet', { add: ['sara', 'pete'], category: 'private' });
    await suite.h.post([
      { conv: 'subs', seq: 1, sender: 'pete' },
      { conv: 'subs', seq: 2, sender: 'pete' },
      { conv: 'subs', seq: 3, sender: 'pete', mentions: ['sara'] },
    ]);
    const { page } = await open('sara', 'T');
    await expect.poll(() => row(page, 'subs').locator('[data-role="sub"]').textContent()).toBe('Group · You were mentioned · 3 new');
    expect(await row(page, 'quiet').locator('[data-role="sub"]').textContent()).toBe('Private chat · No new messages');
    expect(await page.locator('#conversations [data-role="sub"]').allTextContents()).not.toContain(expect.stringMatching(/message #/));
  });

  it("a click is never lost to a repaint: a row's menu opens though a push repaints the list between the press and the release", async () => {
    await suite.h.members('press', { add: ['rita', 'pete'], category: 'group' });
    await suite.h.members('press-2', { add: ['rita', 'pete'], category: 'group' });
    const { page } = await open('rita', 'A');
    await row(page, 'press-2').waitFor();
    await row(page, 'press').hover();
    const box = await row(page, 'press').locator('button[data-action="menu"]').boundingBox();
    if (!box) throw new Error("the row menu's trigger does not show on hover");
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.down();
    // A message lands while the button is held: the list repaints (every paint rebuilds the rows).
    await suite.h.post({ conv: 'press-2', seq: 1, sender: 'pete' });
    await expect.poll(() => page.evaluate('window.redpoint.client.state.conversations.find((c) => c.conv === "press-2")?.unread ?? 0')).toBe(1);
    // Two frames: a paint scheduled by that change would have run by now.
    await page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
    await page.mouse.up();
    await row(page, 'press').locator('[role="menu"]').waitFor({ state: 'visible', timeout: 5_000 });
    // The held paint is not lost either: the row shows the new message once the button is up.
    await expect.poll(() => row(page, 'press-2').getAttribute('data-unread')).toBe('1');
  });

  it('on a phone each row has one control for its actions; "Mark as unread" toggles to "Mark as read" and back', async () => {
    await suite.h.members('tog', { add: ['tom', 'pete'], category: 'group' });
    await suite.h.members('tog-2', { add: ['tom', 'pete'], category: 'group' });
    const { page } = await open('tom', 'P', PHONE);
    await row(page, 'tog').waitFor();
    // One visible control per row besides the row itself (which opens the conversation): the menu.
    const visible = (conv: string) => row(page, conv).locator('button[data-action]:not([data-action="open"]):visible');
    expect(await visible('tog').count()).toBe(1);
    expect(await visible('tog-2').count()).toBe(1);
    expect(await visible('tog').getAttribute('data-action')).toBe('menu');

    await openRowMenu(page, 'tog');
    expect(await visible('tog').count()).toBeGreaterThan(1);
    expect(await visible('tog-2').count()).toBe(1);
    await page.screenshot({ path: join(ARTIFACTS, 'demo-390-row-menu.png') });
    expect(await layoutProblems(page)).toEqual([]);

    await row(page, 'tog').locator('button[data-action="mark-unread"]').click();
    await row(page, 'tog').locator('[data-role="marked"]').waitFor();
    await expect.poll(async () => (await suite.h.unread('tom')).conversations.find((c) => c.conv === 'tog')?.markedUnread).toBe(true);
    // The action closed the menu; open it again: the same place now says "Mark as read".
    expect(await visible('tog').count()).toBe(1);
    await openRowMenu(page, 'tog');
    expect(await row(page, 'tog').locator('button[data-action="read"]').textContent()).toBe('Mark as read');
    await row(page, 'tog').locator('button[data-action="read"]').click();
    await expect.poll(() => row(page, 'tog').locator('[data-role="marked"]').count()).toBe(0);
    await expect.poll(async () => (await suite.h.unread('tom')).conversations.find((c) => c.conv === 'tog')?.markedUnread).toBe(false);
    await openRowMenu(page, 'tog');
    expect(await row(page, 'tog').locator('button[data-action="mark-unread"]').textContent()).toBe('Mark as unread');
  });
});
