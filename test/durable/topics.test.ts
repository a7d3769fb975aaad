import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { topicConv } from '../../protocol/child-id.js';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { durableStack } from './stack.js';

/**
 * Topics' registry (PROTOCOL.md "Topics") in the durable tier: written through to PostgreSQL when
 * a topic is added, put back with its conversation when Redis lost it (conv_restore.lua), and
 * dropped with the conversation by the cold sweep (conv_evict.lua). Without it, a conversation
 * back from PostgreSQL would have no topics: a join would reach none of them, and the cap would
 * count from zero.
 *
 * And each topic's child keeps the parent generation of the newest roster synced into it
 * (conv_members.lua '#P', PostgreSQL `parent_gen`): a child back from PostgreSQL refuses an older
 * roster as the child Redis held did, so a late sync cannot put back a member who left.
 */
describe('durable tier: topics', () => {
  const stack = durableStack('topics', [{ redisPrefix: 'tq', durable: { coldAfterSeconds: 1, run: false } }]);
  const silent = pino({ level: 'silent' });
  const drain = () => stack.server.durable?.persister.drainAll(Date.now() + 20_000);

  it('Redis loses everything: the registry comes back with its conversation, and a join reaches every topic', async () => {
    await stack.server.members('tp-1', { add: ['ta', 'tb'] });
    await stack.server.post([
      { conv: 'tp-1', topic: 'x', seq: 1, sender: 'ta' },
      { conv: 'tp-1', topic: 'y', seq: 1, sender: 'ta' },
    ]);
    const { rows } = await stack.sql.query<{ topic: string }>("SELECT topic FROM redpoint_topics WHERE conv = 'tp-1' ORDER BY topic");
    expect(rows.map((r) => r.topic)).toEqual(['x', 'y']);
    await drain();
    await stack.admin.flushall();

    await stack.server.members('tp-1', { add: ['tc'] });
    await stack.server.post({ conv: 'tp-1', topic: 'x', seq: 2, sender: 'ta', mentions: ['tc'] });
    const tc = await stack.server.unread('tc');
    expect(tc.conversations.map((c) => c.conv).sort()).toEqual(['tp-1', 'tp-1#t:x', 'tp-1#t:y']);
    expect(tc.conversations.find((c) => c.conv === 'tp-1#t:x')).toMatchObject({ parent: 'tp-1', topic: 'x', unread: 1, mentions: 1 });
    expect((await stack.server.engine.topics('tp-1')).sort()).toEqual(['x', 'y']);
  });

  it('the cold sweep drops the registry with its conversation; the next touch restores both', async () => {
    await stack.server.members('tp-2', { add: ['qa', 'qb'] });
    await stack.server.post({ conv: 'tp-2', topic: 'old', seq: 1, sender: 'qa' });
    await drain();
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics);
    await sweep.sweepOnce(Date.now() + 3_600_000);
    expect(await stack.admin.exists('tq:{c:tp-2}')).toBe(0);
    expect(await stack.admin.exists('tq:{c:tp-2}:t')).toBe(0);

    await stack.server.post({ conv: 'tp-2', topic: 'new', seq: 1, sender: 'qa', mentions: ['qb'] });
    expect(await stack.admin.hgetall('tq:{c:tp-2}:t')).toEqual({ old: '0', new: '1' });
    const qb = await stack.server.unread('qb');
    expect(qb.conversations.find((c) => c.conv === 'tp-2#t:new')).toMatchObject({ unread: 1, mentions: 1 });
    expect(qb.conversations.find((c) => c.conv === 'tp-2#t:old')).toMatchObject({ unread: 1 });
  });

  /** The child of `parent`'s topic `topic`, synced at `gen` with `add` (as sync/topics.ts does, THRESHOLD as the server's). */
  const THRESHOLD = 1_000;
  const sync = (parent: string, topic: string, gen: number, add: string[]) =>
    stack.server.engine.changeMembers(topicConv(parent, topic), { add, remove: [], threshold: THRESHOLD, sync: gen });
  const childMembers = async (parent: string, topic: string) =>
    ((await stack.server.engine.roster(topicConv(parent, topic)))?.members ?? []).map((m) => m.uid).sort();

  /**
   * The child holds a newer roster (a sync at gen + 10 that changed nothing but the generation it
   * holds, as when the changes between were a join and the leave after it), then Redis loses it:
   * a late sync at gen + 5, with a member the newer roster no longer has, must change nothing.
   */
  async function olderRosterAfterLoss(parent: string, lose: () => Promise<void>): Promise<void> {
    await stack.server.members(parent, { add: ['pa', 'pb'] });
    await stack.server.post({ conv: parent, topic: 'x', seq: 1, sender: 'pa' });
    const roster = await stack.server.engine.roster(parent);
    if (!roster) throw new Error('no parent');
    const gen = roster.info.gen;
    await drain();
    // Nothing but the generation the child holds changes: the drainer must still write it.
    await sync(parent, 'x', gen + 10, ['pa', 'pb']);
    await drain();
    await lose();

    const stale = await sync(parent, 'x', gen + 5, ['pa', 'pb', 'late']);
    expect(stale.joins).toEqual([]);
    expect(await childMembers(parent, 'x')).toEqual(['pa', 'pb']);
  }

  it('Redis loses a topic child: a late sync of an older roster is refused after the restore', async () => {
    await olderRosterAfterLoss('tp-3', () => stack.admin.flushall().then(() => undefined));
  });

  it('the cold sweep evicts a topic child: a late sync of an older roster is refused after the restore', async () => {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics);
    await olderRosterAfterLoss('tp-4', async () => {
      await sweep.sweepOnce(Date.now() + 3_600_000);
      expect(await stack.admin.exists(`tq:{c:${topicConv('tp-4', 'x')}}`)).toBe(0);
    });
  });

  it("a sync raising the child's parent generation between the drainer's read and its clear keeps the roster's mark", async () => {
    await stack.server.members('tp-5', { add: ['ra'] });
    await stack.server.post({ conv: 'tp-5', topic: 'x', seq: 1, sender: 'ra' });
    await drain();
    const store = stack.server.engine.durableStore?.();
    if (!store) throw new Error('no durable tier');
    const gen = (await stack.server.engine.roster('tp-5'))?.info.gen ?? 0;
    await sync('tp-5', 'x', gen + 10, ['ra']);
    const read = await store.readConversation(topicConv('tp-5', 'x'));
    await sync('tp-5', 'x', gen + 20, ['ra']);
    expect(await store.clearConversation('m', topicConv('tp-5', 'x'), read?.version ?? null)).toBe(false);
    await drain();
    const { rows } = await stack.sql.query<{ parent_gen: string }>('SELECT parent_gen FROM redpoint_conversations WHERE conv = $1', [topicConv('tp-5', 'x')]);
    expect(Number(rows[0]?.parent_gen)).toBe(gen + 20);
  });
});
