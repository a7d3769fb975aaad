import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, demoSuite } from './demo-suite.js';
import { openTools, row } from './demo-ui.js';

/**
 * Threads (PROTOCOL.md "Threads") shown to a person on the demo page, in real Chromium against a
 * real dev-mode server of this file's own: the seed script's conversation ids are fixed, and a
 * page numbers a thread's replies from the seqs it knows, so a second seed on one server would
 * resend seqs a thread it does not follow has already.
 */
const suite = demoSuite();
afterAll(() => {
  expect(suite.pageErrors).toEqual([]);
});
const DESKTOP = { viewport: { width: 1280, height: 800 } };

/** The child rows under an entry (topics, threads), with what their pills say. */
const childRows = async (page: Page, conv: string): Promise<Array<[string, string]>> =>
  Promise.all(
    (await row(page, conv).locator('[data-role="topics"] > li[data-conv]').all()).map(
      async (r): Promise<[string, string]> => [(await r.getAttribute('data-conv')) ?? '', (await r.getAttribute('data-unread')) ?? ''],
    ),
  );
const unreadOf = (page: Page, conv: string): Promise<string | null> => row(page, conv).getAttribute('data-unread');

describe('the demo shows threads', () => {
  it('the seed script\'s thread (PROTOCOL.md "Threads"): a row under its conversation that a reply mentioning the user made them follow; its unread stays out of the conversation\'s, and opening it reads it alone', async () => {
    const { page } = await suite.open('tia', 'T', DESKTOP);
    await openTools(page);
    await page.locator('#seed').click();
    await page.keyboard.press('Escape');
    // Three replies in one request, the second mentioning tia: every implicit follow of a request is
    // made before its messages are recorded (PROTOCOL.md "Threads"), so all three count for tia.
    await expect.poll(() => childRows(page, 'announcements'), { timeout: 15_000 }).toEqual([['announcements#r:1', '3']]);
    await expect.poll(() => unreadOf(page, 'announcements')).toBe('1');
    const before = await suite.h.unread('tia');
    const own = before.conversations.find((c) => c.conv === 'announcements');
    const thread = before.conversations.find((c) => c.conv === 'announcements#r:1');
    expect(own).toMatchObject({ unread: 1, threads: { unread: 3, mentions: 1 } });
    expect(thread).toMatchObject({ parent: 'announcements', thread: 1, unread: 3, mentions: 1, level: 'mentions' });
    expect(await row(page, 'announcements#r:1').locator('[data-role="name"]').textContent()).toBe('# #1');

    await row(page, 'announcements#r:1').locator('[data-action="open"]').click();
    const pane = page.locator('#conversation');
    await pane.waitFor({ state: 'visible' });
    await expect.poll(() => pane.locator('[data-role="message"]').count(), { timeout: 10_000 }).toBe(3);
    await expect.poll(() => unreadOf(page, 'announcements#r:1')).toBe('0');
    // Reading the thread moves neither the conversation's row nor anything but the thread's mention in the badge.
    await expect.poll(async () => (await suite.h.unread('tia')).conversations.find((c) => c.conv === 'announcements#r:1')?.unread, { timeout: 10_000 }).toBe(0);
    const after = await suite.h.unread('tia');
    expect(after.conversations.find((c) => c.conv === 'announcements')).toMatchObject({ unread: 1 });
    expect(after.conversations.find((c) => c.conv === 'announcements')?.threads).toBeUndefined();
    expect(after.total).toBe(before.total - 1);
    await page.screenshot({ path: join(ARTIFACTS, 'demo-thread.png') });
  });
});
