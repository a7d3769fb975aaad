import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../protocol/limits.js';
import type { ConvView, MessageEvent, UnreadSummary } from '../../protocol/types.js';
import { serversPerTest } from '../helpers/servers-per-test.js';
import type { TestServer } from '../helpers/test-server.js';

/**
 * Threads (PROTOCOL.md "Threads") through the HTTP API on both engines: the anchors' complaints
 * (a reply never moves the conversation's count, reading a thread never leaves a count out of
 * step, thread mentions in the badge and thread unread not), implicit and explicit follows, the
 * cap, levels, the category, and bad input. The interleavings of a follow with a leave are
 * test/sync/interleavings.ts's.
 */
describe.each(['memory', 'redis'] as const)('threads (%s)', (engine) => {
  const startServer = serversPerTest(engine);
  const start = async (): Promise<TestServer> => {
    const s = await startServer();
    await s.members('team', { add: ['alice', 'bob', 'carol'] });
    return s;
  };
  /** A message of the conversation itself (a root). */
  const root = (seq: number, sender = 'bob'): MessageEvent => ({ conv: 'team', seq, sender });
  /** Reply `seq` of the thread off root 1 (bob's). */
  const reply = (seq: number, sender: string, mentions?: string[]): MessageEvent => ({
    conv: 'team',
    thread: 1,
    rootSender: 'bob',
    seq,
    sender,
    ...(mentions ? { mentions } : {}),
  });
  const rows = async (s: TestServer, uid: string): Promise<Map<string, ConvView>> => new Map((await s.unread(uid)).conversations.map((c) => [c.conv, c]));
  const follow = (s: TestServer, uid: string, conv: string, rootSeq: number | string) =>
    s.api<{ conv?: string; following?: boolean; changed?: boolean; error?: { code: string; message: string } }>(
      'PUT',
      `/v1/users/${uid}/conversations/${conv}/threads/${rootSeq}`,
    );
  const unfollow = (s: TestServer, uid: string, conv: string, rootSeq: number) =>
    s.api<{ conv: string; following: boolean; changed: boolean }>('DELETE', `/v1/users/${uid}/conversations/${conv}/threads/${rootSeq}`);
  const thread = encodeURIComponent('team#r:1');
  /** Every number of a summary is at least 0 (the anchors' negative counts). */
  const noNegative = (summary: UnreadSummary): void => {
    expect(summary.total).toBeGreaterThanOrEqual(0);
    expect(summary.mentions).toBeGreaterThanOrEqual(0);
    for (const c of summary.conversations) {
      expect(c.unread).toBeGreaterThanOrEqual(0);
      expect(c.mentions).toBeGreaterThanOrEqual(0);
    }
  };

  it("a thread reply never moves the conversation's count: only the thread's followers get a row", async () => {
    const s = await start();
    await s.post([root(1), root(2)]);
    await s.post([reply(1, 'carol'), reply(2, 'carol'), reply(3, 'bob')]);
    const alice = await rows(s, 'alice');
    expect(alice.get('team')).toMatchObject({ lastSeq: 2, unread: 2 });
    expect(alice.has('team#r:1')).toBe(false);
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 0 });
    // The root's sender and the replier follow: carol read up to her own reply 2, bob to his reply 3.
    const bob = await rows(s, 'bob');
    expect(bob.get('team#r:1')).toMatchObject({ parent: 'team', thread: 1, lastSeq: 3, readSeq: 3, unread: 0, level: 'mentions' });
    expect(bob.get('team')).toMatchObject({ lastSeq: 2, unread: 0 });
    const carol = await rows(s, 'carol');
    expect(carol.get('team#r:1')).toMatchObject({ lastSeq: 3, readSeq: 2, unread: 1, mentions: 0 });
    // A follower's thread unread is listed, and summed on the conversation's row, but not in the badge.
    expect(carol.get('team')).toMatchObject({ unread: 2, threads: { unread: 1, mentions: 0 } });
    expect(await s.unread('carol')).toMatchObject({ total: 2, mentions: 0 });
  });

  it('thread mentions count in the badge, thread unread does not; a mention makes the mentioned member a follower, at the head before it', async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob'), reply(2, 'bob')]);
    // alice follows from the reply that mentions her: it counts for her, the earlier ones not.
    await s.post(reply(3, 'carol', ['alice', 'dave']));
    const alice = await rows(s, 'alice');
    expect(alice.get('team#r:1')).toMatchObject({ lastSeq: 3, readSeq: 2, unread: 1, mentions: 1 });
    expect(alice.get('team')).toMatchObject({ unread: 1, threads: { unread: 1, mentions: 1 } });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1, categories: { default: 2 } });
    await s.post(reply(4, 'carol'));
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    // dave is not a member of the conversation: skipped silently.
    expect((await s.unread('dave')).conversations).toEqual([]);
  });

  it("reading a thread never leaves the conversation's or the badge's count out of step, and no count goes negative", async () => {
    const s = await start();
    await s.post([root(1), root(2), reply(1, 'bob', ['alice']), reply(2, 'carol', ['alice']), reply(3, 'carol')]);
    const before = await s.unread('alice');
    expect(before).toMatchObject({ total: 4, mentions: 2 });
    noNegative(before);
    // Reading the thread: its mentions leave the badge, the conversation's row is untouched.
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team#r:1', seq: 2 });
    let alice = await rows(s, 'alice');
    expect(alice.get('team#r:1')).toMatchObject({ readSeq: 2, unread: 1, mentions: 0 });
    expect(alice.get('team')).toMatchObject({ readSeq: 0, unread: 2, threads: { unread: 1, mentions: 0 } });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 0 });
    // A read far past the thread's head, a read of the conversation, an "unread from here" in the thread: never below 0, never mixed up.
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team#r:1', seq: 50 });
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team', seq: 2 });
    alice = await rows(s, 'alice');
    expect(alice.get('team')).toMatchObject({ unread: 0 });
    expect(alice.get('team')).not.toHaveProperty('threads');
    noNegative(await s.unread('alice'));
    expect(await s.unread('alice')).toMatchObject({ total: 0, mentions: 0 });
    await s.ok('POST', `/v1/users/alice/conversations/${thread}/unread-from`, { seq: 1 });
    const after = await s.unread('alice');
    noNegative(after);
    expect(after).toMatchObject({ total: 2, mentions: 2 });
    expect((await rows(s, 'alice')).get('team')).toMatchObject({ unread: 0, threads: { unread: 3, mentions: 2 } });
  });

  it('explicit follow and unfollow: the row appears at the head now, and goes', async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob')]);
    expect(await follow(s, 'alice', 'team', 1)).toMatchObject({ status: 200, body: { conv: 'team#r:1', following: true, changed: true } });
    expect(await follow(s, 'alice', 'team', 1)).toMatchObject({ status: 200, body: { following: true, changed: false } });
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ lastSeq: 1, readSeq: 1, unread: 0, level: 'mentions' });
    await s.post(reply(2, 'bob'));
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ unread: 1 });
    // Read receipts of the thread: alice's read shows, and goes with her unfollow.
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team#r:1', seq: 2 });
    const reads = () => s.api<{ seqs: Array<{ count: number; readers?: string[] }> }>('GET', `/v1/users/bob/conversations/${thread}/reads?seqs=2`);
    expect((await reads()).body.seqs[0]).toMatchObject({ count: 1, readers: ['alice'] });
    expect(await unfollow(s, 'alice', 'team', 1)).toMatchObject({ status: 200, body: { conv: 'team#r:1', following: false, changed: true } });
    expect((await reads()).body.seqs[0]).toMatchObject({ count: 0 });
    expect((await rows(s, 'alice')).has('team#r:1')).toBe(false);
    expect(await unfollow(s, 'alice', 'team', 1)).toMatchObject({ status: 200, body: { changed: false } });
    // Following a thread before any reply: the root's thread starts empty.
    expect(await follow(s, 'alice', 'team', 7)).toMatchObject({ status: 200, body: { conv: 'team#r:7', changed: true } });
    expect((await rows(s, 'alice')).get('team#r:7')).toMatchObject({ parent: 'team', thread: 7, lastSeq: 0, unread: 0 });
  });

  it('over the WebSocket: a follow frame makes the row, which comes as a change; an unfollow frame drops it', async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob')]);
    const phone = await s.client('alice');
    await phone.sync();
    let mark = phone.mark();
    expect(await phone.request({ t: 'follow', conv: 'team', root: 1 })).toMatchObject({ t: 'ack' });
    const change = await phone.waitFrame((f) => f.t === 'change' && f.conv === 'team#r:1', { since: mark, label: 'the follow' });
    expect(change).toMatchObject({ state: { conv: 'team#r:1', parent: 'team', thread: 1, lastSeq: 1, level: 'mentions' } });
    mark = phone.mark();
    expect(await phone.request({ t: 'follow', conv: 'team', root: 1, unfollow: true })).toMatchObject({ t: 'ack' });
    expect(await phone.waitFrame((f) => f.t === 'change' && f.conv === 'team#r:1', { since: mark, label: 'the unfollow' })).toMatchObject({ state: null });
    expect((await rows(s, 'alice')).has('team#r:1')).toBe(false);
    // Refused as over HTTP: not a member, a topic's id, root 0.
    await s.members('secret', { add: ['bob'] });
    expect(await phone.request({ t: 'follow', conv: 'secret', root: 1 })).toMatchObject({ t: 'error', code: 'not_a_member' });
    expect(await phone.request({ t: 'follow', conv: 'team#t:x', root: 1 })).toMatchObject({ t: 'error', code: 'invalid_request' });
    expect(await phone.request({ t: 'follow', conv: 'team', root: 0 })).toMatchObject({ t: 'error', code: 'invalid_request' });
  });

  it("leaving the conversation unfollows all the user's threads of it; a rejoin does not bring them back", async () => {
    const s = await start();
    await s.members('other', { add: ['alice', 'bob'] });
    await s.post([root(1), root(2), { conv: 'other', seq: 1, sender: 'bob' }]);
    await s.post([reply(1, 'bob', ['alice']), { conv: 'team', thread: 2, seq: 1, sender: 'bob', mentions: ['alice'] }]);
    await s.post({ conv: 'other', thread: 1, seq: 1, sender: 'bob', mentions: ['alice'] });
    expect([...(await rows(s, 'alice')).keys()].sort()).toEqual(['other', 'other#r:1', 'team', 'team#r:1', 'team#r:2']);
    await s.members('team', { remove: ['alice'] });
    expect([...(await rows(s, 'alice')).keys()].sort()).toEqual(['other', 'other#r:1']);
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    await s.members('team', { add: ['alice'] });
    expect([...(await rows(s, 'alice')).keys()].sort()).toEqual(['other', 'other#r:1', 'team']);
    // Not a member: a mention does not make a follower.
    await s.members('team', { remove: ['alice'] });
    await s.post(reply(2, 'bob', ['alice']));
    expect([...(await rows(s, 'alice')).keys()].sort()).toEqual(['other', 'other#r:1']);
  });

  it('a thread row starts at level mentions; all and none are stored apart from the default, and unmuting goes back to it', async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob', ['alice']), reply(2, 'bob')]);
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    await s.ok('PUT', `/v1/users/alice/conversations/${thread}`, { level: 'all' });
    expect((await rows(s, 'alice')).get('team#r:1')).not.toHaveProperty('level');
    expect(await s.unread('alice')).toMatchObject({ total: 3, mentions: 1 });
    // Still 'all' after another message and another settings change.
    await s.post(reply(3, 'bob'));
    await s.ok('PUT', `/v1/users/alice/conversations/${thread}`, { markedUnread: true });
    expect(await s.unread('alice')).toMatchObject({ total: 4, mentions: 1 });
    await s.ok('PUT', `/v1/users/alice/conversations/${thread}`, { level: 'none' });
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ muted: true, unread: 3 });
    expect(await s.unread('alice')).toMatchObject({ total: 1, mentions: 0 });
    expect((await rows(s, 'alice')).get('team')).not.toHaveProperty('threads');
    await s.ok('PUT', `/v1/users/alice/conversations/${thread}`, { muted: false });
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ muted: false, level: 'mentions' });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    await s.ok('PUT', `/v1/users/alice/conversations/${thread}`, { level: 'mentions' });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    // The conversation's own row keeps its default, 'all'.
    expect((await rows(s, 'alice')).get('team')).not.toHaveProperty('level');
  });

  it("thread rows take the conversation's category, and a category change reaches them", async () => {
    const s = await start();
    await s.members('team', { category: 'work' });
    await s.post([root(1), reply(1, 'bob', ['alice'])]);
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ category: 'work' });
    await s.members('team', { category: 'play' });
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ category: 'play' });
    expect(await s.unread('alice')).toMatchObject({ categories: { play: 2 } });
  });

  it(`the explicit follow beyond ${LIMITS.threadsFollowedPerConversation} threads of a conversation is refused with limit_exceeded; an implicit one is dropped`, async () => {
    const s = await start();
    const cap = LIMITS.threadsFollowedPerConversation;
    for (let i = 0; i < cap; i += 20) {
      await Promise.all(Array.from({ length: 20 }, (_, k) => follow(s, 'alice', 'team', i + k + 1).then((r) => expect(r.status).toBe(200))));
    }
    const refused = await follow(s, 'alice', 'team', cap + 1);
    expect(refused).toMatchObject({ status: 422, body: { error: { code: 'limit_exceeded' } } });
    expect(refused.body.error?.message).toContain(String(cap));
    // Following one already followed is no new follow.
    expect(await follow(s, 'alice', 'team', 1)).toMatchObject({ status: 200, body: { changed: false } });
    // An implicit follow past the cap is dropped: the reply is recorded, alice gets no row.
    await s.post({ conv: 'team', thread: cap + 2, seq: 1, sender: 'bob', mentions: ['alice'] });
    const alice = await s.unread('alice');
    expect(alice.conversations.filter((c) => c.thread !== undefined)).toHaveLength(cap);
    expect((await rows(s, 'bob')).get(`team#r:${cap + 2}`)).toMatchObject({ lastSeq: 1 });
    // Another conversation's threads have their own cap.
    await s.members('other', { add: ['alice'] });
    expect((await follow(s, 'alice', 'other', 1)).status).toBe(200);
  });

  it('follows racing at the cap: of N concurrent follows when k places are left, exactly k succeed', async () => {
    const s = await start();
    const cap = LIMITS.threadsFollowedPerConversation;
    const left = 2;
    for (let i = 0; i < cap - left; i += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, cap - left - i) }, (_, k) => follow(s, 'alice', 'team', i + k + 1).then((r) => expect(r.status).toBe(200))),
      );
    }
    const racing = await Promise.all(Array.from({ length: 6 }, (_, k) => follow(s, 'alice', 'team', cap + k + 1)));
    expect(racing.map((r) => r.status).sort()).toEqual([200, 200, 422, 422, 422, 422]);
    expect((await s.unread('alice')).conversations.filter((c) => c.thread !== undefined)).toHaveLength(cap);
  });

  it('bad input gets a clear error and changes nothing', async () => {
    const s = await start();
    await s.members('secret', { add: ['bob'] });
    await s.post([root(1), reply(1, 'bob')]);
    const before = await s.unread('alice');
    expect(await follow(s, 'alice', 'nope', 1)).toMatchObject({ status: 404, body: { error: { code: 'unknown_conversation' } } });
    expect(await follow(s, 'alice', 'secret', 1)).toMatchObject({ status: 403, body: { error: { code: 'not_a_member' } } });
    for (const bad of ['0', '-1', 'x', '1.5'])
      expect(await follow(s, 'alice', 'team', bad)).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    expect(await follow(s, 'alice', encodeURIComponent('team#t:design'), 1)).toMatchObject({ status: 400 });
    const post = (body: object) => s.api<{ error: { code: string; message: string } }>('POST', '/v1/messages', body);
    const topicThread = await post({ conv: 'team', topic: 'design', thread: 1, seq: 1, sender: 'bob' });
    expect(topicThread).toMatchObject({ status: 400, body: { error: { code: 'invalid_request' } } });
    expect(topicThread.body.error.message).toContain('not supported');
    expect(await post({ conv: 'team', thread: 0, seq: 1, sender: 'bob' })).toMatchObject({ status: 400 });
    expect(await post({ conv: 'team', thread: -1, seq: 1, sender: 'bob' })).toMatchObject({ status: 400 });
    expect(await post({ conv: 'team', rootSender: 'bob', seq: 2, sender: 'bob' })).toMatchObject({ status: 400 });
    expect(await post({ conv: 'nope', thread: 1, seq: 1, sender: 'bob', mentions: ['alice'] })).toMatchObject({
      status: 404,
      body: { error: { code: 'unknown_conversation' } },
    });
    // A batch with one unknown conversation: nothing of it, not even another thread's follow.
    expect(await post({ messages: [reply(2, 'carol', ['alice']), { conv: 'nope', seq: 1, sender: 'bob' }] })).toMatchObject({ status: 404 });
    expect(await s.unread('alice')).toEqual(before);
    // A user operation on a thread not followed is refused as on a conversation the user is not in.
    expect((await s.api('POST', '/v1/users/alice/read', { conv: 'team#r:1', seq: 1 })).status).toBe(403);
    expect((await s.api('POST', '/v1/users/alice/read', { conv: 'team#r:0', seq: 1 })).status).toBe(400);
  });

  it("the operator's delete of a conversation deletes its followed threads", async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob', ['alice'])]);
    expect((await s.api('DELETE', '/v1/conversations/team')).status).toBe(200);
    expect(await s.unread('alice')).toMatchObject({ total: 0, conversations: [] });
    expect(await s.unread('bob')).toMatchObject({ total: 0, conversations: [] });
    expect(await s.engine.missingConversations(['team#r:1'])).toEqual(['team#r:1']);
  });

  it("a thread nobody follows any more still takes the conversation's category, and goes with the operator's delete", async () => {
    const s = await start();
    await s.post([root(1), reply(1, 'bob', ['alice'])]);
    // An explicit follow of a thread without replies makes its child too.
    expect((await follow(s, 'carol', 'team', 2)).status).toBe(200);
    for (const [uid, rootSeq] of [
      ['alice', 1],
      ['bob', 1],
      ['carol', 2],
    ] as const)
      expect((await unfollow(s, uid, 'team', rootSeq)).status).toBe(200);
    expect(await s.engine.missingConversations(['team#r:1', 'team#r:2'])).toEqual([]);
    await s.members('team', { category: 'play' });
    expect((await s.engine.getConversation('team#r:1'))?.category).toBe('play');
    expect((await s.engine.getConversation('team#r:2'))?.category).toBe('play');
    expect((await s.api('DELETE', '/v1/conversations/team')).status).toBe(200);
    expect(await s.engine.missingConversations(['team#r:1', 'team#r:2'])).toEqual(['team#r:1', 'team#r:2']);
    // Re-created under its id: the thread starts over (its old head is gone).
    await s.members('team', { add: ['alice', 'bob'] });
    await s.post([root(1), reply(1, 'bob', ['alice'])]);
    expect((await rows(s, 'alice')).get('team#r:1')).toMatchObject({ lastSeq: 1, unread: 1, mentions: 1 });
  });
});

/**
 * Two processes: the leave lists the follower's thread rows that the other process made (without
 * that listing, a round fails). The narrower window, a follow whose membership check ran before
 * the leave and whose join lands after its listing, is held at every await point by
 * test/sync/interleavings.ts ("a follow while the follower leaves"): timing alone rarely reaches it.
 */
describe('threads across two server processes on one Redis', () => {
  const startServer = serversPerTest('redis');
  const ROUNDS = 60;

  it('follows of one user racing at the cap through both processes: exactly the places left are taken', async () => {
    const one = await startServer({ redisPrefix: 'shared-cap' });
    const two = await startServer({ redisPrefix: 'shared-cap' });
    await one.members('team', { add: ['alice'] });
    const cap = LIMITS.threadsFollowedPerConversation;
    const put = (s: TestServer, root: number) => s.api('PUT', `/v1/users/alice/conversations/team/threads/${root}`);
    for (let i = 0; i < cap - 3; i += 20)
      await Promise.all(
        Array.from({ length: Math.min(20, cap - 3 - i) }, (_, k) => put(i % 40 === 0 ? one : two, i + k + 1).then((r) => expect(r.status).toBe(200))),
      );
    const racing = await Promise.all(Array.from({ length: 8 }, (_, k) => put(k % 2 === 0 ? one : two, cap + k + 1)));
    expect(racing.map((r) => r.status).sort()).toEqual([200, 200, 200, 422, 422, 422, 422, 422]);
    expect((await two.unread('alice')).conversations.filter((c) => c.thread !== undefined)).toHaveLength(cap);
  });

  it('follows and implicit follows racing the follower leaving through the other process end unfollowed; a rejoin brings nothing back', async () => {
    const one = await startServer({ redisPrefix: 'shared-threads' });
    const two = await startServer({ redisPrefix: 'shared-threads' });
    for (let round = 0; round < ROUNDS; round++) {
      const conv = `race${round}`;
      await one.members(conv, { add: ['alice', 'bob', 'carol'] });
      await one.post({ conv, seq: 1, sender: 'bob' });
      // Through one: an explicit follow and a reply mentioning alice (an implicit follow); through two: alice leaves.
      await Promise.all([
        one.api('PUT', `/v1/users/alice/conversations/${conv}/threads/1`),
        one.post({ conv, thread: 1, rootSender: 'bob', seq: round + 1, sender: 'carol', mentions: ['alice'] }),
        // The leave sent a little later each round, so it lands before, during and after the follows.
        new Promise((resolve) => setTimeout(resolve, (round % 12) * 3)).then(() => two.members(conv, { remove: ['alice'] })),
      ]);
      for (const s of [one, two]) {
        const rows = (await s.unread('alice')).conversations.map((c) => c.conv);
        expect(
          rows.filter((c) => c.startsWith(conv)),
          `round ${round}`,
        ).toEqual([]);
      }
      await two.members(conv, { add: ['alice'] });
      expect((await one.unread('alice')).conversations.map((c) => c.conv).filter((c) => c.startsWith(`${conv}#`))).toEqual([]);
    }
  });
});
