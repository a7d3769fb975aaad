import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { ARTIFACTS, demoSuite, PHONE } from './demo-suite.js';
import { openTools, row, seed } from './demo-ui.js';
import { layoutProblems } from './layout.js';

/**
 * Topics (PROTOCOL.md "Topics") shown to a person on the demo page, in real Chromium against a
 * real dev-mode server: a conversation with topics is one entry of the list with the sum of its
 * counts, its topic rows indented under it; opening a topic reads that topic only, on every
 * device; the seed script makes such a conversation.
 */
const suite = demoSuite();
afterAll(() => {
  expect(suite.pageErrors).toEqual([]);
});
const DESKTOP = { viewport: { width: 1280, height: 800 } };
/** Message-service times (ms): the server takes only plausible ones. */
const NOW = Date.now();

/** The list's entries (top level: a topic row is inside its conversation's entry). */
const listed = async (page: Page): Promise<string[]> =>
  Promise.all((await page.locator('#conversations > li[data-conv]').all()).map(async (r) => (await r.getAttribute('data-conv')) ?? ''));
/** The topic rows under an entry, with what their pills say. */
const topicRows = async (page: Page, conv: string): Promise<Array<[string, string]>> =>
  Promise.all(
    (await row(page, conv).locator('[data-role="topics"] > li[data-conv]').all()).map(
      async (r): Promise<[string, string]> => [(await r.getAttribute('data-conv')) ?? '', (await r.getAttribute('data-unread')) ?? ''],
    ),
  );
const unreadOf = (page: Page, conv: string): Promise<string | null> => row(page, conv).getAttribute('data-unread');
const badge = async (page: Page): Promise<number> => Number((await page.locator('#total [data-role="total"]').textContent())?.match(/\d+/)?.[0] ?? 0);

describe('the demo shows topics', () => {
  it('a conversation with two topics is one entry with the summed count, its topics under it; opening a topic reads only it, and the other tab follows', async () => {
    await suite.h.members('forum', { add: ['tina', 'pete'], category: 'group' });
    await suite.h.members('tdm', { add: ['tina', 'pete'], category: 'private' });
    await suite.h.post([
      { conv: 'tdm', seq: 1, sender: 'pete', at: NOW - 600_000 },
      { conv: 'forum', seq: 1, sender: 'pete', at: NOW - 500_000 },
      { conv: 'forum', seq: 2, sender: 'pete', at: NOW - 400_000 },
      { conv: 'forum', topic: 'design', seq: 1, sender: 'pete', at: NOW - 300_000 },
      { conv: 'forum', topic: 'design', seq: 2, sender: 'pete', at: NOW - 200_000, mentions: ['tina'] },
      { conv: 'forum', topic: 'design', seq: 3, sender: 'pete', at: NOW - 150_000 },
      { conv: 'forum', topic: 'ops', seq: 1, sender: 'pete', at: NOW - 100_000 },
    ]);
    const { page: a } = await suite.open('tina', 'A', DESKTOP);
    const { page: b } = await suite.open('tina', 'B', DESKTOP);
    for (const page of [a, b]) {
      // One entry for the forum (first: its topic ops is the newest activity), the sum on it, the topics under it.
      await expect.poll(() => listed(page), { timeout: 10_000 }).toEqual(['forum', 'tdm']);
      await expect.poll(() => unreadOf(page, 'forum')).toBe('6');
      expect(await row(page, 'forum').getAttribute('data-own-unread')).toBe('2');
      expect(await topicRows(page, 'forum')).toEqual([
        ['forum#t:ops', '1'],
        ['forum#t:design', '3'],
      ]);
      expect(await row(page, 'forum#t:design').locator('[data-role="name"]').textContent()).toBe('# design');
      expect(await row(page, 'forum').locator(':scope > .conv-open [data-role="mention"]').textContent()).toBe('@1');
      expect(await badge(page)).toBe(7);
    }
    expect(await layoutProblems(a)).toEqual([]);
    await a.mouse.move(0, 0);
    await a.screenshot({ path: join(ARTIFACTS, 'demo-topics.png') });

    // Opening the design topic reads it alone: the forum's sum and the badge drop by its 3, the rest stays.
    await row(a, 'forum#t:design').locator('[data-action="open"]').click();
    const pane = a.locator('#conversation');
    await pane.waitFor({ state: 'visible' });
    expect(await pane.locator('[data-role="title"]').textContent()).toBe('forum › design');
    for (const page of [a, b]) {
      await expect.poll(() => unreadOf(page, 'forum#t:design'), { timeout: 10_000 }).toBe('0');
      await expect.poll(() => unreadOf(page, 'forum'), { timeout: 10_000 }).toBe('3');
      expect(await unreadOf(page, 'forum#t:ops')).toBe('1');
      expect(await row(page, 'forum').getAttribute('data-own-unread')).toBe('2');
      await expect.poll(() => badge(page)).toBe(4);
    }
    const server = (await suite.h.unread('tina')).conversations.map((c) => [c.conv, c.readSeq, c.unread]);
    expect(server).toEqual([
      ['forum', 0, 2],
      ['forum#t:design', 3, 0],
      ['forum#t:ops', 0, 1],
      ['tdm', 0, 1],
    ]);

    // The conversation's own row opens the general topic: read alone too.
    await row(b, 'forum').locator(':scope > button[data-action="open"]').click();
    for (const page of [a, b]) {
      await expect.poll(() => unreadOf(page, 'forum'), { timeout: 10_000 }).toBe('1');
      expect(await unreadOf(page, 'forum#t:ops')).toBe('1');
    }
    await expect.poll(async () => (await suite.h.unread('tina')).total).toBe(2);

    // The entry's menu (its own, not its topics'): "Mark all as read" reads every row of it.
    const own = (page: Page, selector: string) => row(page, 'forum').locator(`:scope > ${selector}`);
    await row(a, 'forum').locator(':scope > .conv-open').hover();
    await own(a, 'button[data-action="menu"]').click();
    await own(a, '[role="menu"]').waitFor({ state: 'visible' });
    const items = own(a, '[role="menu"]').locator('[role="menuitem"], [role="menuitemradio"]');
    expect(await items.first().textContent()).toBe('Mark all as read');
    await own(a, '[role="menu"] button[data-action="read-all"]').click();
    for (const page of [a, b]) {
      await expect.poll(() => unreadOf(page, 'forum'), { timeout: 10_000 }).toBe('0');
      expect(await topicRows(page, 'forum')).toEqual([
        ['forum#t:ops', '0'],
        ['forum#t:design', '0'],
      ]);
    }
    await expect.poll(async () => (await suite.h.unread('tina')).total).toBe(1);
  });

  it("a conversation whose own row is deleted while a topic has news: still one entry, with the topic's count, the topic openable", async () => {
    await suite.h.members('vforum', { add: ['vic', 'pete'], category: 'group' });
    await suite.h.post([
      { conv: 'vforum', seq: 1, sender: 'pete', at: NOW - 60_000 },
      { conv: 'vforum', topic: 'a', seq: 1, sender: 'pete', at: NOW - 50_000 },
      { conv: 'vforum', topic: 'a', seq: 2, sender: 'pete', at: NOW - 40_000 },
    ]);
    await suite.h.ok('DELETE', '/v1/users/vic/conversations/vforum');
    const { page } = await suite.open('vic', 'H', DESKTOP);
    await expect.poll(() => topicRows(page, 'vforum'), { timeout: 10_000 }).toEqual([['vforum#t:a', '2']]);
    expect(await listed(page)).toEqual(['vforum']);
    expect(await unreadOf(page, 'vforum')).toBe('2');
    // Its own row is gone: nothing of it to open, only its topic.
    expect(await row(page, 'vforum').locator(':scope > button[data-action="open"]').count()).toBe(0);
    expect(await layoutProblems(page)).toEqual([]);
    await row(page, 'vforum#t:a').locator('[data-action="open"]').click();
    await expect.poll(() => unreadOf(page, 'vforum')).toBe('0');
  });

  it("the seed script makes a conversation with two topics, each with its own messages, on a phone's list too", async () => {
    const { page } = await suite.open('uma', 'S', PHONE);
    await openTools(page);
    await seed(page);
    await page.keyboard.press('Escape');
    await expect
      .poll(() => topicRows(page, 'product-launch'), { timeout: 15_000 })
      .toEqual([
        ['product-launch#t:design', '3'],
        ['product-launch#t:marketing', '2'],
      ]);
    await expect.poll(() => unreadOf(page, 'product-launch')).toBe('7');
    expect(await listed(page)).not.toContain('product-launch#t:design');
    expect(await layoutProblems(page)).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'demo-topics-phone.png') });

    // A topic opens with the lines the seed sent to it (its own seqs), the mention marked.
    await row(page, 'product-launch#t:design').locator('[data-action="open"]').click();
    const pane = page.locator('#conversation');
    await pane.waitFor({ state: 'visible' });
    await expect.poll(() => pane.locator('[data-role="message"]').count(), { timeout: 10_000 }).toBe(3);
    expect(await pane.locator('[data-role="message"][data-mention="true"]').count()).toBe(1);
    expect(await pane.locator('[data-role="message"]').first().textContent()).toContain('Landing page hero v3 is up');
    await expect.poll(() => unreadOf(page, 'product-launch')).toBe('4');

    // The tools send to a topic (its members are its conversation's: "From" is one of them, not uma).
    await page.locator('[data-action="back"]').click();
    await openTools(page);
    expect(await page.locator('#send-conv option[value="product-launch#t:marketing"]').textContent()).toBe('product-launch › marketing');
    await page.locator('#send-conv').selectOption('product-launch#t:marketing');
    await expect.poll(() => page.locator('#send-form input[name="sender"]').inputValue()).toMatch(/^(bob|carol|erin)$/);
    await page.locator('#send-form button[type="submit"]').click();
    await expect.poll(() => unreadOf(page, 'product-launch#t:marketing'), { timeout: 10_000 }).toBe('3');
    await expect.poll(() => unreadOf(page, 'product-launch')).toBe('5');
    const marketing = (await suite.h.unread('uma')).conversations.find((c) => c.conv === 'product-launch#t:marketing');
    expect(marketing?.lastSeq).toBe(3);
  });
});
