import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { durableStack } from './stack.js';

/**
 * Threads (PROTOCOL.md "Threads") in the durable tier: a thread is a child conversation and its
 * rows persist like any conversation's; its registry (Engine.addThread) is written through to
 * PostgreSQL before a child is made, put back with its conversation (conv_restore.lua) and dropped
 * with it by the cold sweep, so a category change and the operator's delete reach every thread,
 * also ones nobody follows, after Redis lost it. What a row
 * stores relative to the thread's default level (rules.ts storedLevel: `mentions` by default,
 * `all` set apart from it) must come back from PostgreSQL as it was, and the follows with it:
 * after Redis lost everything, a leave still unfollows, and a follow is still counted. A follow
 * and an unfollow ask whether the user is a member of the conversation and of the thread: the
 * answer is the restored membership, never the empty store's "no".
 */
describe('durable tier: threads', () => {
  const stack = durableStack('threads', [{ redisPrefix: 'th', durable: { coldAfterSeconds: 1, run: false } }]);
  const drain = () => stack.server.durable?.persister.drainAll(Date.now() + 20_000);
  const follow = (uid: string, conv: string, root: number, method: 'PUT' | 'DELETE' = 'PUT') =>
    stack.server.api(method, `/v1/users/${uid}/conversations/${conv}/threads/${root}`);
  const followed = (following: boolean, changed: boolean, conv: string) => ({ status: 200, body: { conv, following, changed } });

  it('Redis loses everything: thread rows come back with their levels; a leave then unfollows', async () => {
    await stack.server.members('rt-1', { add: ['ra', 'rb', 'rc'], category: 'work' });
    await stack.server.post({ conv: 'rt-1', seq: 1, sender: 'ra' });
    await stack.server.post([
      { conv: 'rt-1', thread: 1, rootSender: 'ra', seq: 1, sender: 'rb', mentions: ['rc'] },
      { conv: 'rt-1', thread: 1, seq: 2, sender: 'rb' },
    ]);
    // rc keeps the default (mentions); ra sets all.
    expect((await stack.server.api('PUT', `/v1/users/ra/conversations/${encodeURIComponent('rt-1#r:1')}`, { level: 'all' })).status).toBe(200);
    const before = { ra: await stack.server.unread('ra'), rc: await stack.server.unread('rc') };
    expect(before.ra).toMatchObject({ total: 2, mentions: 0 });
    expect(before.rc).toMatchObject({ total: 2, mentions: 1 });
    await drain();
    await stack.admin.flushall();

    const after = { ra: await stack.server.unread('ra'), rc: await stack.server.unread('rc') };
    expect(after.ra).toMatchObject({ total: before.ra.total, mentions: before.ra.mentions, conversations: before.ra.conversations });
    expect(after.rc).toMatchObject({ total: before.rc.total, mentions: before.rc.mentions, conversations: before.rc.conversations });
    expect(after.rc.conversations.find((c) => c.conv === 'rt-1#r:1')).toMatchObject({ level: 'mentions', category: 'work', unread: 2, mentions: 1 });

    await stack.server.members('rt-1', { remove: ['rc'] });
    expect((await stack.server.unread('rc')).conversations).toEqual([]);
    await stack.server.post({ conv: 'rt-1', thread: 1, seq: 3, sender: 'rb' });
    expect((await stack.server.unread('ra')).conversations.find((c) => c.conv === 'rt-1#r:1')).toMatchObject({ unread: 3 });
  });

  // Found by test/durable/property.test.ts (seed 878023004): after a wipe the follow read the
  // memberships from Redis alone: 403 not_a_member for a member, `changed: true` for a follower.
  it('Redis loses everything: a follow and an unfollow answer from the memberships PostgreSQL holds', async () => {
    await stack.server.members('rt-2', { add: ['fa', 'fb'] });
    expect(await follow('fa', 'rt-2', 1)).toMatchObject(followed(true, true, 'rt-2#r:1'));
    expect(await follow('fb', 'rt-2', 2)).toMatchObject(followed(true, true, 'rt-2#r:2'));
    await drain();
    await stack.admin.flushall();
    // Neither the conversation nor the thread in Redis: fa is a member, and follows already.
    expect(await follow('fa', 'rt-2', 1)).toMatchObject(followed(true, false, 'rt-2#r:1'));
    await drain();
    await stack.admin.flushall();
    // The conversation put back by a message, the thread not: fb follows it already.
    await stack.server.post({ conv: 'rt-2', seq: 1, sender: 'fa' });
    expect(await follow('fb', 'rt-2', 2)).toMatchObject(followed(true, false, 'rt-2#r:2'));
    await drain();
    await stack.admin.flushall();
    // An unfollow of a thread Redis lost: fb was following it.
    expect(await follow('fb', 'rt-2', 2, 'DELETE')).toMatchObject(followed(false, true, 'rt-2#r:2'));
    expect((await stack.server.unread('fb')).conversations.map((c) => c.conv)).toEqual(['rt-2']);
    expect((await stack.server.unread('fa')).conversations.map((c) => c.conv)).toEqual(['rt-2', 'rt-2#r:1']);
  });

  it("Redis loses everything: the operator's delete still finds a thread nobody follows (PostgreSQL holds its child)", async () => {
    await stack.server.members('rt-4', { add: ['da', 'db'] });
    await stack.server.post([
      { conv: 'rt-4', seq: 1, sender: 'da' },
      { conv: 'rt-4', thread: 1, rootSender: 'da', seq: 1, sender: 'db' },
    ]);
    for (const uid of ['da', 'db']) expect(await follow(uid, 'rt-4', 1, 'DELETE')).toMatchObject(followed(false, true, 'rt-4#r:1'));
    await drain();
    await stack.admin.flushall();
    expect((await stack.server.api('DELETE', '/v1/conversations/rt-4')).status).toBe(200);
    expect(await stack.server.engine.missingConversations(['rt-4', 'rt-4#r:1'])).toEqual(['rt-4', 'rt-4#r:1']);
  });

  // Found by test/durable/property.test.ts (seed -2093859528, path 11) while the registry alone
  // listed the threads for a category change: Redis lost it, and a followed thread kept its category.
  it('Redis loses everything: a category change still reaches the followed threads (the registry went with Redis)', async () => {
    await stack.server.members('rt-5', { add: ['ea', 'eb'], category: 'system' });
    expect(await follow('ea', 'rt-5', 2)).toMatchObject(followed(true, true, 'rt-5#r:2'));
    await drain();
    await stack.admin.flushall();
    await stack.server.members('rt-5', { add: ['ea', 'eb'], category: 'work' });
    expect((await stack.server.unread('ea')).conversations.find((c) => c.conv === 'rt-5#r:2')).toMatchObject({ category: 'work' });
  });

  /** A thread of `conv` nobody follows (its repliers unfollowed it), drained to PostgreSQL. */
  async function unfollowedThread(conv: string, uids: [string, string]): Promise<string> {
    await stack.server.members(conv, { add: uids, category: 'system' });
    await stack.server.post([
      { conv, seq: 1, sender: uids[0] },
      { conv, thread: 1, rootSender: uids[0], seq: 1, sender: uids[1] },
    ]);
    for (const uid of uids) expect(await follow(uid, conv, 1, 'DELETE')).toMatchObject(followed(false, true, `${conv}#r:1`));
    await drain();
    return `${conv}#r:1`;
  }
  const categoryOf = async (conv: string) => (await stack.server.engine.getConversation(conv))?.category;
  const sweeper = () => {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    return new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, pino({ level: 'silent' }), stack.server.server.metrics);
  };

  it("the registry is in PostgreSQL before the thread's child is made", async () => {
    const child = await unfollowedThread('rt-6', ['ga', 'gb']);
    expect(await stack.server.engine.getConversation(child)).not.toBeNull();
    const { rows } = await stack.sql.query<{ root: string }>("SELECT root FROM redpoint_threads WHERE conv = 'rt-6'");
    expect(rows.map((r) => Number(r.root))).toEqual([1]);
    // Marked held by PostgreSQL: the next replies do not write it again.
    expect(await stack.admin.hgetall('th:{c:rt-6}:h')).toEqual({ '1': '1' });
  });

  it('Redis loses everything: a category change still reaches a thread nobody follows (the registry comes back from PostgreSQL)', async () => {
    const child = await unfollowedThread('rt-7', ['ha', 'hb']);
    await stack.admin.flushall();
    await stack.server.members('rt-7', { add: [], category: 'work' });
    expect(await categoryOf(child)).toBe('work');
    expect(await stack.server.engine.threads('rt-7')).toEqual([1]);
  });

  it('the cold sweep evicts the registry with its conversation; a category change after still reaches a thread nobody follows', async () => {
    const child = await unfollowedThread('rt-8', ['ia', 'ib']);
    await sweeper().sweepOnce(Date.now() + 3_600_000);
    for (const key of ['th:{c:rt-8}', 'th:{c:rt-8}:h', `th:{c:${child}}`]) expect(await stack.admin.exists(key), key).toBe(0);
    await stack.server.members('rt-8', { add: [], category: 'work' });
    expect(await categoryOf(child)).toBe('work');
  });

  it("Redis loses everything: the operator's delete takes a thread nobody follows and its registry, in PostgreSQL too", async () => {
    const child = await unfollowedThread('rt-9', ['ja', 'jb']);
    await stack.admin.flushall();
    expect((await stack.server.api('DELETE', '/v1/conversations/rt-9')).status).toBe(200);
    expect(await stack.server.engine.missingConversations(['rt-9', child])).toEqual(['rt-9', child]);
    const { rows } = await stack.sql.query("SELECT root FROM redpoint_threads WHERE conv = 'rt-9'");
    expect(rows).toEqual([]);
  });

  it('the cold sweep evicted the conversation and its thread: a follow answers from PostgreSQL', async () => {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, pino({ level: 'silent' }), stack.server.server.metrics);
    await stack.server.members('rt-3', { add: ['ca', 'cb'] });
    expect(await follow('ca', 'rt-3', 1)).toMatchObject(followed(true, true, 'rt-3#r:1'));
    await drain();
    await sweep.sweepOnce(Date.now() + 3_600_000);
    for (const conv of ['rt-3', 'rt-3#r:1']) expect(await stack.admin.exists(`th:{c:${conv}}`), conv).toBe(0);
    expect(await follow('ca', 'rt-3', 1)).toMatchObject(followed(true, false, 'rt-3#r:1'));
    expect(await follow('cb', 'rt-3', 1)).toMatchObject(followed(true, true, 'rt-3#r:1'));
  });
});
