import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { topicConv } from '../../protocol/child-id.js';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import type { Engine } from '../../server/engine/engine.js';
import { durableStack } from './stack.js';

/**
 * The Redis engine's reads of a conversation (engine.ts) with the durable tier: a conversation
 * Redis lost (FLUSHALL, a failover) or the cold sweep evicted is restored from PostgreSQL first,
 * and the read answers what it answered before, never the empty store's "no such conversation".
 * Topics and threads lean on these answers: a follow asks `joinTag` whether the user is a member
 * (a wipe once gave 403 not_a_member), a topic's message asks `addTopic`, a membership change asks
 * `topics`, a sync reads the `roster`. The engine conformance suite (memory, Redis) cannot hold
 * this: neither loses a conversation without the durable tier.
 */
describe('durable tier: every read of a conversation restores one Redis lost first', () => {
  const stack = durableStack('conversation_reads', [{ redisPrefix: 'cr', durable: { coldAfterSeconds: 1, run: false } }]);
  const drain = () => stack.server.durable?.persister.drainAll(Date.now() + 20_000);

  /** Each read, as an answer that can be compared before and after the loss. */
  const READS: Record<string, (e: Engine, conv: string) => Promise<unknown>> = {
    joinTag: (e, conv) => e.joinTag(conv, 'ma'),
    joinTagOfTopic: (e, conv) => e.joinTag(topicConv(conv, 'x'), 'ma'),
    roster: async (e, conv) => {
      const roster = await e.roster(conv);
      return roster && { info: roster.info, members: [...roster.members].sort((a, b) => a.uid.localeCompare(b.uid)) };
    },
    getConversation: (e, conv) => e.getConversation(conv),
    missingConversations: (e, conv) => e.missingConversations([conv, topicConv(conv, 'x')]),
    heads: async (e, conv) => [...(await e.heads([conv, topicConv(conv, 'x')]))].sort(),
    topics: (e, conv) => e.topics(conv),
    // Registered either way: a restored topic is 'present', not 'ready' (conv_restore.lua: its next
    // message syncs its child again, which changes nothing if it was complete), never 'added' again.
    addTopic: async (e, conv) => {
      const outcome = await e.addTopic(conv, 'x', 100);
      return outcome === 'ready' || outcome === 'present' ? 'registered' : outcome;
    },
  };

  const lose = {
    'Redis lost everything': async () => {
      await stack.admin.flushall();
    },
    'the cold sweep evicted it': async () => {
      const durable = stack.server.durable;
      const store = stack.server.engine.durableStore?.();
      if (!durable || !store) throw new Error('no durable tier');
      const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, pino({ level: 'silent' }), stack.server.server.metrics);
      await sweep.sweepOnce(Date.now() + 3_600_000);
    },
  } as const;

  let n = 0;
  for (const [loss, wipe] of Object.entries(lose)) {
    for (const [name, read] of Object.entries(READS)) {
      it(`${loss}: ${name} answers as before`, async () => {
        const conv = `cr-${++n}`;
        await stack.server.members(conv, { add: ['ma', 'mb'], category: 'work' });
        await stack.server.post([
          { conv, seq: 2, sender: 'mb' },
          { conv, topic: 'x', seq: 1, sender: 'mb' },
        ]);
        const engine = stack.server.engine;
        const before = await read(engine, conv);
        await drain();
        await wipe();
        expect(await stack.admin.exists(`cr:{c:${conv}}`), 'gone from Redis').toBe(0);
        expect(await read(engine, conv)).toEqual(before);
      });
    }
  }
});
