import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { type FlushStats, Ingest } from '../../server/sync/ingest.js';
import { changeMembership } from '../../server/sync/membership.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { type CallPoint, type Control, controlledEngine, InjectedFault, type Phase } from './controlled-engine.js';

/**
 * Group commit while a flush is in flight: with one flush allowed at a time, a flush held at a
 * store call lets later submissions queue; they must merge into the next flush (one op per
 * (user, conversation), the max seqs), and a failure of the held flush must reject its own
 * submissions only. The counts stay exact either way, and retrying what failed changes nothing
 * already applied: the records are max-registers.
 */

const OPTIONS = { snapshotEvery: 100, streamMaxLen: 1000 };
const redis = fileFixture('redis-server', () => startRedisServer());
let prefixes = 0;
const ENGINES: ReadonlyArray<readonly [string, () => Promise<Engine>]> = [
  ['memory', async () => new MemoryEngine(OPTIONS)],
  ['redis', () => createRedisEngine({ url: redis().url, ...OPTIONS, prefix: `inflight${++prefixes}` })],
];

interface Held {
  engine: Engine;
  store: Engine;
  release: () => void;
  calls: CallPoint[];
}

/** A store whose first flush is held at its first `recordMessages`, then meets `fault` at `phase` of its first `applyUserOps`. */
const opened: Engine[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((e) => e.close()));
});

async function heldStore(open: () => Promise<Engine>, fault: Control, phase: Phase): Promise<Held> {
  const store = await open();
  opened.push(store);
  await changeMembership(store, 500, 'c', { add: ['alice', 'bob'], remove: [] });
  let release = (): void => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let held = false;
  let faulted = false;
  const { engine, calls } = controlledEngine(store, (p) => {
    if (p.method === 'recordMessages' && p.phase === 'before' && !held) {
      held = true;
      return { kind: 'hold', release: released };
    }
    if (p.method === 'applyUserOps' && p.phase === phase && !faulted) {
      faulted = true;
      return fault;
    }
    return { kind: 'pass' };
  });
  return { engine, store, release, calls };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function stateOf(store: Engine, uid: string): Promise<{ version: number; lastSeq: number; readSeq: number; mentions: number; total: number }> {
  const s = await store.userState(uid);
  const c = s.states.find((x) => x.conv === 'c');
  return { version: s.version, lastSeq: c?.lastSeq ?? 0, readSeq: c?.readSeq ?? 0, mentions: c?.mentions ?? 0, total: s.totals.total };
}

async function runHeld(
  open: () => Promise<Engine>,
  fault: Control,
  phase: Phase,
): Promise<{ held: Held; flushes: FlushStats[]; first: PromiseSettledResult<void>; later: PromiseSettledResult<void>[] }> {
  const held = await heldStore(open, fault, phase);
  const ingest = new Ingest(held.engine, 1);
  const flushes: FlushStats[] = [];
  ingest.onFlush = (stats) => flushes.push(stats);
  const first = ingest.submit([{ conv: 'c', seq: 1, sender: 'bob' }]);
  await turn();
  // The first flush is now held in the store; these queue, over several event-loop turns.
  const later = [ingest.submit([{ conv: 'c', seq: 2, sender: 'bob' }]), ingest.submit([{ conv: 'c', seq: 4, sender: 'bob', mentions: ['alice'] }])];
  await turn();
  later.push(ingest.submit([{ conv: 'c', seq: 3, sender: 'alice' }]));
  await turn();
  expect(flushes).toHaveLength(0);
  held.release();
  const settled = await Promise.allSettled([first, ...later]);
  await ingest.idle();
  return { held, flushes, first: settled[0] as PromiseSettledResult<void>, later: settled.slice(1) };
}

describe.each(ENGINES)('Ingest with a flush in flight (%s)', (_name, open) => {
  it('merges what queued behind a held flush into ONE next flush, one op per (user, conversation) with the max seqs', async () => {
    const { held, flushes, first, later } = await runHeld(open, { kind: 'pass' }, 'before');
    expect(first.status).toBe('fulfilled');
    expect(later.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(flushes.map((f) => f.messages)).toEqual([1, 3]);
    // Alice and Bob, one op each for conversation c, in the merged flush.
    expect(flushes[1]?.userOps).toBe(2);
    expect(await stateOf(held.store, 'alice')).toMatchObject({ lastSeq: 4, readSeq: 3, mentions: 1, total: 1 });
    expect(await stateOf(held.store, 'bob')).toMatchObject({ lastSeq: 4, readSeq: 4, mentions: 0, total: 0 });
  });

  for (const [name, fault, phase] of [
    ['before the user step reached the store (nothing of it applied)', { kind: 'fail' }, 'before'],
    ['after the user step was applied (its reply lost)', { kind: 'fail' }, 'after'],
    ['halfway through the user step (one user applied)', { kind: 'fail-partway', applied: 1 }, 'after'],
  ] as const satisfies readonly (readonly [string, Control, Phase])[]) {
    it(`a held flush failing ${name} rejects only its own submission; the merged flush lands; a retry changes nothing further`, async () => {
      const { held, flushes, first, later } = await runHeld(open, fault, phase);
      expect(first.status).toBe('rejected');
      expect(first.status === 'rejected' && first.reason).toBeInstanceOf(InjectedFault);
      expect(later.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
      expect(flushes.map((f) => f.messages)).toEqual([3]);
      const alice = await stateOf(held.store, 'alice');
      const bob = await stateOf(held.store, 'bob');
      // Seq 1's failure loses nothing: lastSeq is a max-register, so seq 4 counts 1..4.
      expect(alice).toMatchObject({ lastSeq: 4, readSeq: 3, mentions: 1, total: 1 });
      expect(bob).toMatchObject({ lastSeq: 4, readSeq: 4, mentions: 0, total: 0 });

      // The message service retries the failed request: accepted, and nothing moves.
      const retry = new Ingest(held.store, 1);
      await retry.submit([{ conv: 'c', seq: 1, sender: 'bob' }]);
      expect(await stateOf(held.store, 'alice')).toEqual(alice);
      expect(await stateOf(held.store, 'bob')).toEqual(bob);
    });
  }
});
