import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { durableStack } from './stack.js';

/**
 * Topics' registry (PROTOCOL.md "Topics") in the durable tier: written through to PostgreSQL when
 * a topic is added, put back with its conversation when Redis lost it (conv_restore.lua), and
 * dropped with the conversation by the cold sweep (conv_evict.lua). Without it, a conversation
 * back from PostgreSQL would have no topics: a join would reach none of them, and the cap would
 * count from zero.
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
});
