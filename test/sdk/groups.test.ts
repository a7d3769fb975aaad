import { createElement as h, type ReactElement } from 'react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import {
  type ConversationGroup,
  type ConversationView,
  childLabel,
  childrenOf,
  conversationGroups,
  groupOf,
  type RedpointClient,
} from '../../client-demo/sdk/src/index.js';
import { RedpointProvider, useChildren, useConversationGroup, useConversationList } from '../../client-demo/sdk/src/react.js';
import { sdkSuite } from './harness.js';
import { convergedTo, until } from './wait.js';

/**
 * Child rows (topics now, threads later: any row with `parent`) grouped under their conversation:
 * against a real server first, rows exactly as it sends them; then the cases it cannot be made
 * to produce on demand (a hidden conversation row, a thread's row, ties of activity).
 */
const { h: server, started } = sdkSuite();

/** Message-service times (ms): the server takes only plausible ones. */
const T = 1_700_000_000_000;

/** `conv` with topics `design` and `ops`: the general topic 2 unread, design 3 (one mentions `me`), ops 1. */
async function forum(conv: string, me: string, peer: string): Promise<void> {
  await server.members(conv, { add: [me, peer], category: 'group' });
  await server.post([
    { conv, seq: 1, sender: peer, at: T + 1_000 },
    { conv, seq: 2, sender: peer, at: T + 2_000 },
    { conv, topic: 'design', seq: 1, sender: peer, at: T + 3_000 },
    { conv, topic: 'design', seq: 2, sender: peer, at: T + 4_000, mentions: [me] },
    { conv, topic: 'design', seq: 3, sender: peer, at: T + 5_000 },
    { conv, topic: 'ops', seq: 1, sender: peer, at: T + 6_000 },
  ]);
}

const brief = (g: ConversationGroup | undefined) =>
  g && { conv: g.conv, own: g.view?.unread, children: g.children.map((c) => [childLabel(c), c.unread]), unread: g.unread, mentions: g.mentions };

describe('child rows from the server, grouped under their conversation', () => {
  it("a conversation with two topics is one entry: its topics inside it with their own counts, the sum over all three, the badge's totals untouched", async () => {
    await forum('g-team', 'g-me', 'g-peer');
    await server.members('g-dm', { add: ['g-me', 'g-peer'], category: 'private' });
    await server.post({ conv: 'g-dm', seq: 1, sender: 'g-peer', at: T + 500 });
    const c = await started('g-me');
    await until(c, (s) => s.conversations.length === 4, 'the two conversations and two topics');
    const { conversations, totals } = c.state;
    // The rows as the server sends them: each topic names its conversation and topic.
    expect(conversations.find((v) => v.conv === 'g-team#t:design')).toMatchObject({ parent: 'g-team', topic: 'design', unread: 3, mentions: 1 });

    expect(childrenOf(conversations, 'g-team').map((v) => v.conv)).toEqual(['g-team#t:ops', 'g-team#t:design']);
    expect(childrenOf(conversations, 'g-dm')).toEqual([]);
    expect(brief(groupOf(conversations, 'g-team'))).toEqual({
      conv: 'g-team',
      own: 2,
      children: [
        ['ops', 1],
        ['design', 3],
      ],
      unread: 6,
      mentions: 1,
    });
    // The list's top level: no topic beside its conversation; the forum first (its topic ops is the newest activity).
    const groups = conversationGroups(conversations);
    expect(groups.map((g) => [g.conv, g.unread, g.children.length])).toEqual([
      ['g-team', 6, 2],
      ['g-dm', 1, 0],
    ]);
    expect(groups[0]?.at).toBe(T + 6_000);
    // Totals stay the server's (a sum over every row), and equal the groups' badge shares.
    expect(totals?.total).toBe(7);
    expect(groups.reduce((n, g) => n + g.inBadge, 0)).toBe(totals?.total);
  });

  it("reading one topic drops that topic and the conversation's sum only; a muted topic stays in the sum, out of the badge", async () => {
    await forum('g-read', 'g-reader', 'g-writer');
    const c = await started('g-reader');
    await until(c, (s) => groupOf(s.conversations, 'g-read')?.unread === 6, 'the forum');
    c.markRead('g-read#t:design');
    expect(brief(groupOf(c.state.conversations, 'g-read'))).toMatchObject({
      own: 2,
      children: [
        ['ops', 1],
        ['design', 0],
      ],
      unread: 3,
      mentions: 0,
    });
    await c.mute('g-read#t:ops');
    await convergedTo(server, c, 'g-reader');
    const group = groupOf(c.state.conversations, 'g-read');
    expect([group?.unread, group?.inBadge, c.state.totals?.total]).toEqual([3, 2, 2]);
    const serverRows = (await server.unread('g-reader')).conversations.map((v) => [v.conv, v.readSeq]);
    expect(serverRows).toEqual([
      ['g-read', 0],
      ['g-read#t:design', 3],
      ['g-read#t:ops', 0],
    ]);
  });
});

describe("the user's mutedMentions setting in the groups' sums", () => {
  it('a muted conversation with an unread mention: the groups sum to the totals with the setting on as off', async () => {
    await server.members('mm-quiet', { add: ['mm-me', 'mm-peer'], category: 'group' });
    await server.members('mm-loud', { add: ['mm-me', 'mm-peer'], category: 'group' });
    await server.ok('PUT', '/v1/users/mm-me/conversations/mm-quiet', { level: 'none' });
    await server.post([
      { conv: 'mm-quiet', seq: 1, sender: 'mm-peer', at: T + 1_000 },
      { conv: 'mm-quiet', seq: 2, sender: 'mm-peer', at: T + 2_000, mentions: ['mm-me'] },
      { conv: 'mm-loud', seq: 1, sender: 'mm-peer', at: T + 3_000 },
    ]);
    const c = await started('mm-me');
    await until(c, (s) => s.totals?.total === 1, 'the unmuted unread');
    const inBadge = (s: typeof c.state) => conversationGroups(s.conversations, s.mutedMentions).reduce((n, g) => n + g.inBadge, 0);
    expect([c.state.mutedMentions, inBadge(c.state)]).toEqual([false, 1]);
    await server.ok('PUT', '/v1/users/mm-me/settings', { mutedMentions: true });
    await until(c, (s) => s.mutedMentions && s.totals?.total === 2, 'the setting on');
    expect(inBadge(c.state)).toBe(2);
    expect(groupOf(c.state.conversations, 'mm-quiet', c.state.mutedMentions)?.inBadge).toBe(1);
  });
});

describe('threads from the SDK (PROTOCOL.md "Threads")', () => {
  it("follow() brings the thread's row under its conversation at the head now; replies count there, not in the conversation; unfollow() drops the row", async () => {
    await server.members('t-chan', { add: ['t-me', 't-peer'], category: 'group' });
    await server.post([
      { conv: 't-chan', seq: 1, sender: 't-peer', at: T + 1_000 },
      { conv: 't-chan', thread: 1, rootSender: 't-peer', seq: 1, sender: 't-peer', at: T + 2_000 },
    ]);
    const c = await started('t-me');
    await until(c, (s) => s.conversations.length === 1, 'the conversation');
    await c.follow('t-chan', 1);
    await until(c, (s) => s.conversations.some((v) => v.conv === 't-chan#r:1'), "the thread's row");
    // Joined at the head now: the reply before the follow is not unread.
    expect(c.state.conversations.find((v) => v.conv === 't-chan#r:1')).toMatchObject({ parent: 't-chan', thread: 1, unread: 0, level: 'mentions' });
    await server.post({ conv: 't-chan', thread: 1, seq: 2, sender: 't-peer', mentions: ['t-me'], at: T + 3_000 });
    await until(c, (s) => groupOf(s.conversations, 't-chan')?.threadUnread === 1, 'the reply');
    const group = groupOf(c.state.conversations, 't-chan');
    // The conversation's own unread does not move; the thread's mention is in the entry and the badge.
    expect([group?.unread, group?.threadUnread, group?.mentions, c.state.totals?.total]).toEqual([1, 1, 1, 2]);
    expect(c.state.conversations.find((v) => v.conv === 't-chan')?.threads).toEqual({ unread: 1, mentions: 1 });
    await convergedTo(server, c, 't-me');
    await c.unfollow('t-chan', 1);
    await until(c, (s) => !s.conversations.some((v) => v.conv === 't-chan#r:1'), 'the row gone');
    expect(c.state.totals?.total).toBe(1);
  });

  it('a follow the server refuses rejects (not a member), and bad arguments reject at once', async () => {
    await server.members('t-other', { add: ['t-peer'], category: 'group' });
    const c = await started('t-me2');
    await expect(c.follow('t-other', 1)).rejects.toThrow(/not_a_member/);
    await expect(c.follow('t-other', 0)).rejects.toThrow(RangeError);
    await expect(c.follow('t-other#t:x', 1)).rejects.toThrow(RangeError);
  });
});

/** A row as the SDK shows it; `fields` set what a case needs. */
function row(conv: string, fields: Partial<ConversationView> = {}): ConversationView {
  return { conv, lastSeq: 1, readSeq: 0, unread: 1, mentions: 0, muted: false, markedUnread: false, category: 'group', pending: false, ...fields };
}

describe('grouping rows by `parent`', () => {
  it("a child row whose conversation's row is hidden is still listed, under its conversation's id", () => {
    const rows = [row('solo', { at: 10 }), row('forum#t:a', { parent: 'forum', topic: 'a', at: 20, unread: 2 })];
    const groups = conversationGroups(rows);
    expect(groups.map((g) => [g.conv, g.view?.conv, g.children.map((c) => c.conv), g.unread])).toEqual([
      ['forum', undefined, ['forum#t:a'], 2],
      ['solo', 'solo', [], 1],
    ]);
    expect(groupOf(rows, 'forum')?.view).toBeUndefined();
    expect(groupOf(rows, 'nothing')).toBeUndefined();
  });

  it("a thread's row (parent and thread) slots in beside topics, named by its root's seq; its unread stays out of the conversation's", () => {
    const rows = [
      row('chan', { unread: 4, at: 5 }),
      row('chan#t:x', { parent: 'chan', topic: 'x', unread: 0 }),
      row('chan#r:17', { parent: 'chan', thread: 17, unread: 2, mentions: 1, level: 'mentions', at: 9 }),
    ];
    const group = groupOf(rows, 'chan');
    expect(group?.children.map(childLabel)).toEqual(['#17', 'x']);
    // A reply never counts in the conversation (PROTOCOL.md "Threads"), nor moves it in the list; its mention counts.
    expect([group?.unread, group?.threadUnread, group?.mentions, group?.at]).toEqual([4, 2, 1, 5]);
    // A 'mentions' row adds only its mention to the badge (the server's rule per row).
    expect(group?.inBadge).toBe(5);
    expect(conversationGroups(rows).map((g) => g.conv)).toEqual(['chan']);
  });

  it("with the user's mutedMentions on, a muted row adds its mentions to inBadge as the server's totals do; off, nothing", () => {
    const rows = [
      row('quiet', { unread: 3, mentions: 1, muted: true }),
      row('quiet#t:x', { parent: 'quiet', topic: 'x', unread: 2, mentions: 2, muted: true }),
      row('loud', { unread: 4, mentions: 0 }),
    ];
    expect(groupOf(rows, 'quiet')?.inBadge).toBe(0);
    expect(groupOf(rows, 'quiet', true)?.inBadge).toBe(3);
    expect(conversationGroups(rows, true).map((g) => [g.conv, g.inBadge])).toEqual([
      ['loud', 4],
      ['quiet', 3],
    ]);
  });

  it('orders entries by the newest activity of any of their rows, unknown last, ties by id; marked unread shows on the entry', () => {
    const rows = [
      row('b', { at: 5 }),
      row('a', { at: 5 }),
      row('c', { at: 1 }),
      row('c#t:new', { parent: 'c', topic: 'new', at: 9, unread: 0, markedUnread: true }),
      row('d'),
    ];
    const groups = conversationGroups(rows);
    expect(groups.map((g) => [g.conv, g.at ?? null])).toEqual([
      ['c', 9],
      ['a', 5],
      ['b', 5],
      ['d', null],
    ]);
    expect(groups[0]?.markedUnread).toBe(true);
    expect(groups[1]?.markedUnread).toBe(false);
  });
});

/** Renders what the hooks return for `conv`, as text (react-dom/server reads the client's state once). */
function rendered(client: RedpointClient, conv: string): string {
  function Forum(): ReactElement {
    const group = useConversationGroup(conv);
    const topics = useChildren(conv);
    const list = useConversationList();
    return h(
      'p',
      null,
      `${conv} ${group?.unread ?? '-'}: ${topics.map((t) => `${childLabel(t)}=${t.unread}`).join(',')} | list ${list.map((g) => g.conv).join(',')}`,
    );
  }
  return renderToString(h(RedpointProvider, { client }, h(Forum)));
}

describe('React hooks for child rows', () => {
  it("useChildren, useConversationGroup and useConversationList render a conversation's topics and its sum, and follow a read", async () => {
    await forum('g-hook', 'g-hooked', 'g-poster');
    const c = await started('g-hooked');
    await until(c, (s) => groupOf(s.conversations, 'g-hook')?.unread === 6, 'the forum');
    expect(rendered(c, 'g-hook')).toBe('<p>g-hook 6: ops=1,design=3 | list g-hook</p>');
    c.markRead('g-hook#t:ops');
    expect(rendered(c, 'g-hook')).toBe('<p>g-hook 5: ops=0,design=3 | list g-hook</p>');
    expect(rendered(c, 'g-none')).toBe('<p>g-none -:  | list g-hook</p>');
  });
});
