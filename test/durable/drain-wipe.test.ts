import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Persister } from '../../server/durable/persister.js';
import type { DurableStore } from '../../server/engine/durable-backing.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { durableStack } from './stack.js';

/**
 * Redis lost in the middle of a drain pass: the pass read the marks, then Redis was flushed (or
 * failed over to an empty replica), then the pass reads the state the marks name and finds
 * nothing. Nothing is gone from PostgreSQL for that: absence in Redis is not a deletion.
 */
describe('durable tier: Redis lost in the middle of a drain pass', () => {
  const stack = durableStack('drainwipe', [{ durable: { run: false } }]);

  it('a FLUSHALL between reading the marks and reading the state deletes nothing from PostgreSQL', async () => {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    await stack.server.members('wiped', { add: ['wa', 'wb'] });
    await stack.server.post([
      { conv: 'wiped', seq: 1, sender: 'wa' },
      { conv: 'wiped', seq: 2, sender: 'wa' },
    ]);
    await stack.server.ok('POST', '/v1/users/wb/read', { conv: 'wiped', seq: 1 });
    await durable.persister.drainAll(Date.now() + 20_000);
    const before = await stack.server.unread('wb');

    // Changes after the drain: marks for the roster, the head and both users' records.
    await stack.server.members('wiped', { add: ['wc'] });
    await stack.server.post({ conv: 'wiped', seq: 3, sender: 'wc' });
    // A drainer whose pass is interrupted by the wipe right after it took the conversations'
    // marks. Records have no such gap (persist_take reads a mark and its state in one step); their
    // take waits for the wipe, so what comes back is what the last drain wrote, exactly.
    let wiped = false;
    let wipe: () => void = () => undefined;
    const wipedNow = new Promise<void>((resolve) => {
      wipe = resolve;
    });
    const paused: DurableStore = Object.create(store, {
      dirty: {
        value: async (...args: Parameters<DurableStore['dirty']>) => {
          const marks = await store.dirty(...args);
          if (!wiped && marks.convs.length + marks.users.length > 0) {
            wiped = true;
            await stack.admin.flushall();
            wipe();
          }
          return marks;
        },
      },
      takeRecords: {
        value: async (...args: Parameters<DurableStore['takeRecords']>) => {
          await wipedNow;
          return store.takeRecords(...args);
        },
      },
    });
    const drainer = new Persister(
      paused,
      durable.tier.pg,
      { intervalMs: 1_000, batch: 100, backlogWarn: 1e6 },
      pino({ level: 'silent' }),
      new Metrics({ processMetrics: false }),
    );
    await drainer.drainOnce();
    expect(wiped).toBe(true);

    const saved = await durable.tier.pg.loadConversations(['wiped']);
    expect(
      saved
        .get('wiped')
        ?.members.map((m) => m.uid)
        .sort(),
    ).toEqual(['wa', 'wb']);
    // What PostgreSQL held before the wipe comes back on the next touch.
    const after = await stack.server.unread('wb');
    expect(after.conversations.find((c) => c.conv === 'wiped')).toMatchObject(before.conversations.find((c) => c.conv === 'wiped') ?? {});
    expect(after.total).toBe(before.total);
  });
});
