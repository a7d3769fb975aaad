import { afterEach, describe, expect, it } from 'vitest';
import type { ReadsFrame } from '../../protocol/frames.js';
import type { PullReply } from '../../protocol/types.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

interface ReceiptsReply {
  conv: string;
  members: number;
  large: boolean;
  seqs: Array<{ seq: number; count: number; readers?: string[] }>;
}

const INTERVAL_MS = 300;

/**
 * Read receipts over HTTP and WebSocket (PROTOCOL.md "Read receipts"), on both engines: the
 * peer's position in /unread and in pull's `peerReads`, `reads` pushes coalesced, counts and
 * readers of a group, the privacy setting both ways, and that a peer's read changes nothing of
 * the other user's stream, unread or badge.
 */
describe.each(['memory', 'redis'] as const)('read receipts (%s)', (engine) => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (onSend = true): Promise<TestServer> => {
    const s = await startTestServer({
      engine,
      ...(engine === 'redis' ? { redis: redis() } : {}),
      config: { receipts: { pushIntervalMs: INTERVAL_MS, detailMembers: 30, onSend } },
    });
    servers.push(s);
    return s;
  };
  const peerOf = async (s: TestServer, uid: string, conv: string): Promise<number | undefined> =>
    (await s.unread(uid)).conversations.find((c) => c.conv === conv)?.peerReadSeq;
  const pull = async (s: TestServer, uid: string): Promise<PullReply> => {
    const r = await s.asUser<PullReply>(uid, 'GET', '/v1/sync');
    expect(r.status).toBe(200);
    return r.body;
  };
  const reads = async (s: TestServer, uid: string, conv: string, query: string): Promise<ReceiptsReply> =>
    s.ok<ReceiptsReply>('GET', `/v1/users/${uid}/conversations/${conv}/reads?${query}`);

  it("one-to-one: the peer's read shows in /unread and pull's peerReads, and changes nothing of the sender's stream or badge", async () => {
    const s = await start();
    await s.members('d', { add: ['alice', 'bob'] });
    await s.post([1, 2, 3].map((seq) => ({ conv: 'd', seq, sender: 'bob' })));
    // Bob's own messages raised his position: alice sees 3.
    expect(await peerOf(s, 'alice', 'd')).toBe(3);
    expect(await peerOf(s, 'bob', 'd')).toBeUndefined();
    const before = await s.unread('bob');
    await s.ok('POST', '/v1/users/alice/read', { conv: 'd', seq: 2 });
    expect(await peerOf(s, 'bob', 'd')).toBe(2);
    expect((await pull(s, 'bob')).peerReads).toEqual({ d: 2 });
    expect((await pull(s, 'alice')).peerReads).toEqual({ d: 3 });
    // Bob's version, unread and badge did not move.
    const after = await s.unread('bob');
    expect({ ...after, conversations: after.conversations.map(({ peerReadSeq: _p, ...v }) => v) }).toEqual(before);
    // A lower read changes nothing ("has seen up to" never goes down).
    await s.ok('POST', '/v1/users/alice/read', { conv: 'd', seq: 1 });
    expect(await peerOf(s, 'bob', 'd')).toBe(2);
    // A delete reads to the head.
    await s.ok('DELETE', '/v1/users/alice/conversations/d');
    expect((await pull(s, 'bob')).peerReads).toEqual({ d: 3 });
  });

  it('RECEIPTS_ON_SEND off (the default): a sender is recorded only by their reads', async () => {
    const s = await start(false);
    await s.members('d', { add: ['alice', 'bob'] });
    await s.post({ conv: 'd', seq: 1, sender: 'bob' });
    expect(await peerOf(s, 'alice', 'd')).toBeUndefined();
    await s.ok('POST', '/v1/users/bob/read', { conv: 'd', seq: 1 });
    expect(await peerOf(s, 'alice', 'd')).toBe(1);
  });

  it("the peer's reads are pushed as `reads` frames, coalesced: at most one per interval, the latest, no change frame", async () => {
    const s = await start();
    await s.members('d', { add: ['alice', 'bob'] });
    await s.post([1, 2, 3, 4, 5, 6].map((seq) => ({ conv: 'd', seq, sender: 'bob' })));
    const bob = await s.client('bob');
    await bob.sync();
    const cursor = { ...bob.cursor };
    await new Promise((r) => setTimeout(r, INTERVAL_MS * 2));
    const mark = bob.mark();
    for (const seq of [1, 2, 3, 4, 5, 6]) await s.ok('POST', '/v1/users/alice/read', { conv: 'd', seq });
    const last = await bob.waitFrame((f): f is ReadsFrame => f.t === 'reads' && f.reads.alice === 6, { since: mark, label: 'the latest read' });
    expect(last).toEqual({ t: 'reads', conv: 'd', members: 2, reads: { alice: 6 } });
    await new Promise((r) => setTimeout(r, INTERVAL_MS * 2));
    const frames = bob.framesSince(mark);
    // Six reads within one interval: the first at once, then the latest once the interval ends.
    expect(frames.filter((f) => f.t === 'reads').length).toBeLessThanOrEqual(2);
    expect(frames.filter((f) => f.t === 'change')).toEqual([]);
    expect(bob.cursor).toEqual(cursor);
  });

  it('a group: counts and readers per seq, the asker excluded, the sender counted; latest=N; a leaver no longer counts', async () => {
    const s = await start();
    await s.members('g', { add: ['a', 'b', 'c'] });
    await s.post([1, 2, 3].map((seq) => ({ conv: 'g', seq, sender: 'a' })));
    await s.ok('POST', '/v1/users/b/read', { conv: 'g', seq: 3 });
    await s.ok('POST', '/v1/users/c/read', { conv: 'g', seq: 1 });
    expect(await reads(s, 'a', 'g', 'seqs=1,2,3')).toEqual({
      conv: 'g',
      members: 3,
      large: false,
      seqs: [
        { seq: 1, count: 2, readers: ['b', 'c'] },
        { seq: 2, count: 1, readers: ['b'] },
        { seq: 3, count: 1, readers: ['b'] },
      ],
    });
    expect((await reads(s, 'a', 'g', 'latest=2')).seqs.map((r) => r.seq)).toEqual([2, 3]);
    expect((await reads(s, 'b', 'g', 'seqs=1')).seqs).toEqual([{ seq: 1, count: 2, readers: ['a', 'c'] }]);
    // A one-to-one peer position is only for conversations of two.
    expect(await peerOf(s, 'a', 'g')).toBeUndefined();
    await s.members('g', { remove: ['c'] });
    expect((await reads(s, 'a', 'g', 'seqs=1')).seqs).toEqual([{ seq: 1, count: 1, readers: ['b'] }]);
  });

  it("erasing a user (DELETE /v1/users/:uid) drops their positions: no one sees an erased user's reads", async () => {
    const s = await start();
    await s.members('g', { add: ['alice', 'bob', 'carol'] });
    await s.post({ conv: 'g', seq: 1, sender: 'bob' });
    await s.ok('POST', '/v1/users/alice/read', { conv: 'g', seq: 1 });
    expect((await reads(s, 'bob', 'g', 'seqs=1')).seqs).toEqual([{ seq: 1, count: 1, readers: ['alice'] }]);
    await s.ok('DELETE', '/v1/users/alice');
    expect((await reads(s, 'bob', 'g', 'seqs=1')).seqs).toEqual([{ seq: 1, count: 0, readers: [] }]);
  });

  it('deleting a conversation for everyone (DELETE /v1/conversations/:conv) drops its positions: one re-created under its id starts clean', async () => {
    const s = await start();
    await s.members('g', { add: ['alice', 'bob', 'carol'] });
    await s.post([1, 2, 3].map((seq) => ({ conv: 'g', seq, sender: 'bob' })));
    await s.ok('POST', '/v1/users/alice/read', { conv: 'g', seq: 3 });
    await s.ok('DELETE', '/v1/conversations/g');
    await s.members('g', { add: ['alice', 'bob', 'carol'] });
    await s.post({ conv: 'g', seq: 1, sender: 'bob' });
    expect((await reads(s, 'bob', 'g', 'seqs=1')).seqs).toEqual([{ seq: 1, count: 0, readers: [] }]);
  });

  it('a read-diffused group gives counts only', async () => {
    const s = await start();
    await s.members('big', { add: ['a', 'b', 'c', 'd', 'e'] });
    await s.post({ conv: 'big', seq: 1, sender: 'a' });
    await s.ok('POST', '/v1/users/b/read', { conv: 'big', seq: 1 });
    expect(await reads(s, 'c', 'big', 'seqs=1')).toEqual({ conv: 'big', members: 5, large: true, seqs: [{ seq: 1, count: 2 }] });
  });

  it('privacy: a user who does not share is not recorded (positions dropped) and sees no one else; sharing again records the current position', async () => {
    const s = await start();
    await s.members('d', { add: ['alice', 'bob'] });
    await s.post([1, 2].map((seq) => ({ conv: 'd', seq, sender: 'bob' })));
    await s.ok('POST', '/v1/users/alice/read', { conv: 'd', seq: 1 });
    expect(await peerOf(s, 'bob', 'd')).toBe(1);
    expect(await s.ok('GET', '/v1/users/alice/settings')).toEqual({ uid: 'alice', shareReads: true, mutedMentions: false });
    expect(await s.ok('PUT', '/v1/users/alice/settings', { shareReads: false })).toEqual({ uid: 'alice', shareReads: false, mutedMentions: false });
    expect(await s.ok('GET', '/v1/users/alice/settings')).toEqual({ uid: 'alice', shareReads: false, mutedMentions: false });
    // Alice's position is gone for bob, and her next read is not recorded.
    expect(await peerOf(s, 'bob', 'd')).toBeUndefined();
    await s.ok('POST', '/v1/users/alice/read', { conv: 'd', seq: 2 });
    expect(await peerOf(s, 'bob', 'd')).toBeUndefined();
    expect((await pull(s, 'bob')).peerReads).toBeUndefined();
    // ...and she sees no one else's, though bob shares.
    expect(await peerOf(s, 'alice', 'd')).toBeUndefined();
    expect((await pull(s, 'alice')).peerReads).toBeUndefined();
    const refused = await s.api('GET', '/v1/users/alice/conversations/d/reads?seqs=1');
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: 'forbidden' } });
    // Back on: her current readSeq is recorded again.
    await s.ok('PUT', '/v1/users/alice/settings', { shareReads: true });
    expect(await peerOf(s, 'bob', 'd')).toBe(2);
    expect(await peerOf(s, 'alice', 'd')).toBe(2);
  });

  it('bad requests are refused and change nothing', async () => {
    const s = await start();
    await s.members('g', { add: ['a', 'b'] });
    for (const query of ['', 'seqs=1&latest=2', 'seqs=x', 'latest=0', 'latest=51', `seqs=${Array.from({ length: 51 }, (_, i) => i + 1).join(',')}`]) {
      const r = await s.api('GET', `/v1/users/a/conversations/g/reads?${query}`);
      expect(r.status, query).toBe(400);
    }
    expect((await s.api('GET', '/v1/users/zed/conversations/g/reads?seqs=1')).body).toMatchObject({ error: { code: 'not_a_member' } });
    expect((await s.api('GET', '/v1/users/a/conversations/nope/reads?seqs=1')).body).toMatchObject({ error: { code: 'unknown_conversation' } });
    expect((await s.api('PUT', '/v1/users/a/settings', { shareReads: 'no' })).status).toBe(400);
    expect((await s.api('PUT', '/v1/users/a/settings', {})).status).toBe(400);
    expect(await s.ok('GET', '/v1/users/a/settings')).toEqual({ uid: 'a', shareReads: true, mutedMentions: false });
    // A user token acts only for its own user.
    expect((await s.asUser('b', 'PUT', '/v1/users/a/settings', { shareReads: false })).status).toBe(403);
    expect((await s.asUser('a', 'PUT', '/v1/users/a/settings', { shareReads: false })).status).toBe(200);
  });
});
