import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { changeMembership } from '../../server/sync/membership.js';
import { Receipts } from '../../server/sync/receipts.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';

/**
 * Receipts' privacy under interleavings (server/sync/receipts.ts): a raise reads the setting
 * before and after it writes; turning sharing off writes the setting, then drops. Each order of
 * the two ends with no position of a user who does not share.
 */
describe.each(['memory', 'redis'] as const)('read receipts: privacy interleavings (%s)', (kind) => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const engines: Engine[] = [];
  let prefixes = 0;
  afterEach(async () => {
    for (const e of engines.splice(0)) await e.close();
  });
  const open = async (): Promise<{ engine: Engine; receipts: Receipts }> => {
    const options = { snapshotEvery: 10, streamMaxLen: 100 };
    const engine =
      kind === 'memory' ? new MemoryEngine(options) : await createRedisEngine({ url: redis().url, prefix: `rx${process.pid}-${++prefixes}`, ...options });
    engines.push(engine);
    // The conversation step and its members' user steps (turning sharing off drops from the user's conversations).
    await changeMembership(engine, 10, 'd', { add: ['a', 'b'], remove: [] });
    return { engine, receipts: new Receipts(engine, { pushIntervalMs: 50, detailMembers: 30 }) };
  };
  const positionOf = async (engine: Engine, uid: string): Promise<number | undefined> =>
    (await engine.readPositions.read(['d'], { upTo: 2 })).get('d')?.positions.get(uid);

  it('a raise whose first check saw sharing on, writing after sharing was turned off and dropped, takes its write back', async () => {
    const { engine, receipts } = await open();
    // The raise read "sharing" before the user turned it off...
    const staleCheck = Promise.resolve(true);
    // ...the whole turn-off (setting, then drops) ran before the raise wrote.
    await receipts.setSharing('a', false);
    await receipts.raise('a', [{ conv: 'd', seq: 5 }], staleCheck);
    expect(await positionOf(engine, 'a')).toBeUndefined();
    receipts.close();
  });

  it('a raise that wrote before the turn-off is dropped by it', async () => {
    const { engine, receipts } = await open();
    await receipts.raise('a', [{ conv: 'd', seq: 5 }]);
    expect(await positionOf(engine, 'a')).toBe(5);
    await receipts.setSharing('a', false);
    expect(await positionOf(engine, 'a')).toBeUndefined();
    // Off: nothing more is recorded; on again: the current readSeq (none here: not in the user's state) is not invented.
    await receipts.raise('a', [{ conv: 'd', seq: 6 }]);
    expect(await positionOf(engine, 'a')).toBeUndefined();
    receipts.close();
  });

  it('a turn-off that died between writing the setting and dropping: the position is never announced, and the next read drops it', async () => {
    const { engine, receipts } = await open();
    await receipts.raise('a', [{ conv: 'd', seq: 5 }]);
    // setSharing's first write only (the process died before its drop).
    await engine.readPositions.setSharing('a', false);
    expect(await positionOf(engine, 'a')).toBe(5);
    const announced: unknown[] = [];
    const announce = engine.readPositions.announce.bind(engine.readPositions);
    engine.readPositions.announce = async (changes) => {
      announced.push(...changes);
      return announce(changes);
    };
    await receipts.raise('b', [{ conv: 'd', seq: 3 }]);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(JSON.stringify(announced)).not.toContain('"a":5');
    await receipts.raise('a', [{ conv: 'd', seq: 6 }]);
    expect(await positionOf(engine, 'a')).toBeUndefined();
    receipts.close();
  });

  it('a failing store after the read does not fail the raise: reported, repaired by the next read', async () => {
    const { engine, receipts } = await open();
    const errors: unknown[] = [];
    receipts.onError = (err) => errors.push(err);
    await receipts.raise('a', [{ conv: 'd', seq: 3 }], Promise.reject(new Error('store down')));
    expect(errors).toHaveLength(1);
    expect(await positionOf(engine, 'a')).toBeUndefined();
    await receipts.raise('a', [{ conv: 'd', seq: 3 }]);
    expect(await positionOf(engine, 'a')).toBe(3);
    receipts.close();
  });
});
