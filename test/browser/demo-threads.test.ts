import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { seedChats } from '../../client-demo/app/seed-script.js';
import { threadConv, topicConv } from '../../protocol/child-id.js';
import { ARTIFACTS, demoSuite } from './demo-suite.js';
import { openTools, row, seed } from './demo-ui.js';

/**
 * Threads (PROTOCOL.md "Threads") shown to a person on the demo page, in real Chromium against a
 * real dev-mode server of this file's own: the seed script's conversation ids are fixed, so the
 * first test's thread is `announcements#r:1` only on a server no other file seeded.
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
    await seed(page);
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

  it("a second seed on the same server, from another user's page, continues every conversation and topic from its head, and its thread hangs off the root it sent: all of it counts for that user", async () => {
    // The page's tools log this once every message of the seed is acknowledged.
    const seededBy = async (uid: string, device: string): Promise<Page> => {
      const { page } = await suite.open(uid, device, DESKTOP);
      await openTools(page);
      await seed(page);
      await page.keyboard.press('Escape');
      return page;
    };
    /** A member's lastSeq of each of their rows: the head, in write-diffused conversations. */
    const heads = async (uid: string): Promise<Record<string, number>> =>
      Object.fromEntries((await suite.h.unread(uid)).conversations.map((c) => [c.conv, c.lastSeq]));
    // How many messages the seed sends to each conversation and topic everyone shares (a DM is its user's own).
    const shared = seedChats('uma', (name) => name)
      .filter((chat) => chat.category !== 'private')
      .flatMap((chat) => [
        [chat.conv, chat.lines.length] as const,
        ...(chat.topics ?? []).map((t) => [topicConv(chat.conv, t.topic), t.lines.length] as const),
      ]);

    // At least one seed before (the test above's too, when it ran).
    await seededBy('vic', 'V');
    const before = await heads('vic');
    const page = await seededBy('uma', 'U');
    const after = await heads('uma');
    expect(Object.fromEntries(shared.map(([conv]) => [conv, after[conv]]))).toEqual(
      Object.fromEntries(shared.map(([conv, sent]) => [conv, (before[conv] ?? 0) + sent])),
    );
    // uma's thread: off the announcement her seed sent, its three replies new to her (the second mentions her).
    const root = after.announcements ?? 0;
    const summary = await suite.h.unread('uma');
    expect(summary.conversations.find((c) => c.conv === threadConv('announcements', root))).toMatchObject({ thread: root, lastSeq: 3, unread: 3, mentions: 1 });
    expect(summary.conversations.find((c) => c.conv === 'design-team')).toMatchObject({ unread: 6, mentions: 1 });
    await expect.poll(() => childRows(page, 'announcements'), { timeout: 15_000 }).toEqual([[threadConv('announcements', root), '3']]);
    // vic's thread, off the announcement vic's seed sent, got no reply of uma's.
    expect(await heads('vic')).toMatchObject({ [threadConv('announcements', before.announcements ?? 0)]: 3 });
  });
});
