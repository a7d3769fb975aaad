import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, type ContextOptions, demoSuite, PHONE } from './demo-suite.js';
import { openRowMenu, openTools, row } from './demo-ui.js';
import { buttonProblems, coverProblems, heights, layoutProblems, scrollToY, shownWhole } from './layout.js';

/**
 * The demo page on a phone (390×844, touch, no hover) and a desktop (1200×780) in real Chromium:
 * its layout checked on geometry (boxes that must not overlap, stay on screen, show the names),
 * the mention count per row, the offline banner and the reset notice never under the header, a
 * stale error cleared once the server is back. Screenshots go to test-artifacts/ to look at; the
 * assertions are on boxes and styles, not pixels.
 */
const UID = 'alice';
const DESKTOP = { viewport: { width: 1200, height: 780 } };
/** Long enough to need cutting at phone width. */
const LONG = 'release-train-weekly-sync-and-retro';

const suite = demoSuite();
const pageErrors = suite.pageErrors;

beforeAll(async () => {
  // Every kind of row: unread, mentions, muted with 99+, marked unread, a long name, all read.
  await suite.h.members('bob', { add: [UID, 'bob'], category: 'private' });
  await suite.h.members('design-team', { add: [UID, 'bob', 'carol'], category: 'group' });
  await suite.h.members(LONG, { add: [UID, 'carol', 'erin'], category: 'group' });
  await suite.h.members('random', { add: [UID, 'dave'], category: 'group' });
  await suite.h.members('announcements', { add: [UID, 'redpoint-bot'], category: 'system' });
  await suite.h.post([
    { conv: 'bob', seq: 1, sender: 'bob' },
    { conv: 'design-team', seq: 1, sender: 'carol' },
    { conv: 'design-team', seq: 2, sender: 'bob', mentions: [UID] },
    ...[1, 2, 3].map((seq) => ({ conv: LONG, seq, sender: 'erin' })),
    ...Array.from({ length: 120 }, (_, i) => ({ conv: 'random', seq: i + 1, sender: 'dave' })),
    { conv: 'announcements', seq: 1, sender: 'redpoint-bot' },
  ]);
  await suite.h.api('PUT', `/v1/users/${UID}/conversations/random`, { muted: true });
  await suite.h.api('PUT', `/v1/users/${UID}/conversations/announcements`, { markedUnread: true });
});

async function open(device: string, options: ContextOptions): Promise<Page> {
  const { page } = await suite.open(UID, device, options);
  await page.locator('li[data-conv="random"] [data-role="unread"]').waitFor();
  return page;
}

describe('demo page on every screen', () => {
  for (const [name, options] of [
    ['phone 390×844', PHONE],
    ['desktop 1200×780', DESKTOP],
  ] as const) {
    it(`${name}: names visible, nothing overlapping, no sideways scroll, buttons that look like buttons`, async () => {
      const page = await open(`L${options.viewport.width}`, options);
      // Nothing hovered: a phone has no hover, and the buttons must not depend on it.
      await page.mouse.move(0, 0);
      await page.screenshot({ path: join(ARTIFACTS, `demo-screens-${options.viewport.width}.png`), fullPage: true });
      expect(await layoutProblems(page)).toEqual([]);
      // At rest a phone shows each row's menu trigger, a desktop none (hover shows it, below).
      if (options === PHONE) expect(await buttonProblems(page)).toEqual([]);
      else expect(await buttonProblems(page)).toEqual(['no conversation buttons']);
      // Short names show whole; a long one may be cut (the layout check saw enough of it).
      expect(await shownWhole(page, 'li[data-conv="design-team"] [data-role="name"]')).toBe(true);
      expect(await row(page, LONG).locator('[data-role="name"]').textContent()).toBe(LONG);
      // Touch targets on a phone: the row buttons (the row, its menu's trigger, the menu's items) are at least 32 px tall.
      if (options === PHONE) {
        await openRowMenu(page, 'design-team');
        expect(Math.min(...(await heights(page, '#conversations button[data-action]')))).toBeGreaterThanOrEqual(32);
        expect(await layoutProblems(page)).toEqual([]);
      } else {
        // At desktop width a row's menu trigger shows on hover; it reads as a button then.
        await row(page, 'design-team').hover();
        expect(await buttonProblems(page)).toEqual([]);
      }
    });
  }

  it('each row shows its mention count (@2), and reading clears it', async () => {
    const page = await open('M', PHONE);
    await suite.h.members('mentions', { add: [UID, 'bob'], category: 'group' });
    await suite.h.post([
      { conv: 'mentions', seq: 1, sender: 'bob', mentions: [UID] },
      { conv: 'mentions', seq: 2, sender: 'bob' },
      { conv: 'mentions', seq: 3, sender: 'bob', mentions: [UID, 'carol'] },
    ]);
    const mention = row(page, 'mentions').locator('[data-role="mention"]');
    await expect.poll(() => mention.textContent().catch(() => null)).toBe('@2');
    expect(await row(page, 'mentions').locator('[data-role="unread"]').textContent()).toBe('3');
    expect(await row(page, 'design-team').locator('[data-role="mention"]').textContent()).toBe('@1');
    expect(await layoutProblems(page)).toEqual([]);
    // On a phone the row's actions sit behind its one menu control.
    await openRowMenu(page, 'mentions');
    await row(page, 'mentions').locator('button[data-action="read"]').click();
    await expect.poll(() => mention.count()).toBe(0);
    await expect.poll(async () => (await suite.h.unread(UID)).conversations.find((c) => c.conv === 'mentions')?.mentions).toBe(0);
  });

  it('offline: the banner shows below the header at any scroll; an error from then is gone once live again', async () => {
    // A list longer than the screen, so that there is something to scroll.
    for (let i = 1; i <= 12; i++) await suite.h.members(`filler-${String(i).padStart(2, '0')}`, { add: [UID, 'bob'], category: 'group' });
    const page = await open('O', PHONE);
    await row(page, 'filler-12').waitFor();
    await suite.h.down();
    try {
      await page.locator('#connection[data-state="offline"]').waitFor({ timeout: 10_000 });
      await page.locator('#banner').waitFor({ state: 'visible' });
      const reached: number[] = [];
      for (const y of [0, 400, 100_000]) {
        reached.push(await scrollToY(page, y));
        expect(await coverProblems(page, '#banner'), `scrolled to ${y}`).toEqual([]);
      }
      // The page is long enough at this width for the last scroll to go past the first screen.
      expect(reached[2]).toBeGreaterThan(400);
      expect(await layoutProblems(page)).toEqual([]);

      // A test message sent from the tools while the server is away fails, and says so.
      await openTools(page);
      await page.locator('#send-form button[type="submit"]').click();
      await page.locator('#log[data-kind="error"]').waitFor();
      expect(await page.locator('#log').textContent()).toBe('Failed: the server is unreachable');
      await page.screenshot({ path: join(ARTIFACTS, 'demo-390-offline.png') });
    } finally {
      await suite.h.up();
    }
    await page.locator('#connection[data-state="live"]').waitFor({ timeout: 15_000 });
    await expect.poll(() => page.locator('#log').textContent()).toBe('');
    expect(await page.locator('#log').getAttribute('data-kind')).not.toBe('error');
    expect(await page.locator('#banner').isHidden()).toBe(true);
    // A restart over the same state is no reset.
    expect(await page.locator('#notice').isHidden()).toBe(true);
    // A failure while live is not stale: it stays while the counts change under it.
    await page.locator('#create-form input[name="conv"]').fill('new-group');
    await page.locator('#create-form input[name="members"]').fill('bob#1');
    await page.locator('#create-form button[type="submit"]').click();
    await page.locator('#log[data-kind="error"]').waitFor();
    await suite.h.post({ conv: 'bob', seq: 2, sender: 'bob' });
    await expect.poll(() => row(page, 'bob').locator('[data-role="unread"]').textContent()).toBe('2');
    expect(await page.locator('#log').getAttribute('data-kind')).toBe('error');
  });

  // Last: it leaves the server without any state.
  it('a server that restarted without its state: a notice says so, below the header, until dismissed', async () => {
    const page = await open('R', PHONE);
    const desktop = await open('RD', DESKTOP);
    await suite.h.down();
    await suite.h.up({ freshEngine: true });
    for (const p of [page, desktop]) {
      await p.locator('#notice').waitFor({ state: 'visible', timeout: 15_000 });
      expect(await p.locator('#notice-text').textContent()).toMatch(/^The server's state was reset \(.+\): counts reloaded from the server\.$/);
      // The fresh server knows nothing of alice: what it has (nothing) is on screen, live.
      await p.locator('#connection[data-state="live"]').waitFor();
      await p.locator('#empty').waitFor({ state: 'visible' });
      expect(await p.locator('#total [data-role="total"]').textContent()).toBe('All read');
    }
    // (Nothing to scroll here: the fresh server has no chats. The offline test scrolls the banner.)
    expect(await coverProblems(page, '#notice')).toEqual([]);
    expect(await coverProblems(desktop, '#notice')).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'demo-390-reset.png') });
    await page.locator('#notice-dismiss').click();
    expect(await page.locator('#notice').isHidden()).toBe(true);
    expect(pageErrors).toEqual([]);
  });
});
