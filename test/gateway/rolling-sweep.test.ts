import { describe, expect, it } from 'vitest';
import { RollingSweep } from '../../server/gateway/rolling-sweep.js';
import { mulberry32 } from '../helpers/prng.js';

describe('RollingSweep', () => {
  it('checks every key once per period, spread over the turns of the wheel, never all at once', async () => {
    const checked: number[][] = [];
    let turn: number[] = [];
    const sweep = new RollingSweep<number>(120_000, 250, 1_000, async (key) => void turn.push(key), mulberry32(9));
    for (let k = 0; k < 48_000; k++) sweep.add(k);
    const slots = 120_000 / 250;
    for (let t = 0; t < slots; t++) {
      sweep.turn();
      await new Promise((r) => setImmediate(r));
      checked.push(turn);
      turn = [];
    }
    const all = checked.flat();
    expect(all).toHaveLength(48_000);
    expect(new Set(all).size).toBe(48_000);
    // 100 keys per turn on average; no turn carries more than twice that.
    expect(Math.max(...checked.map((c) => c.length))).toBeLessThan(200);
  });

  it('runs at most `concurrency` checks at once, and never queues a key twice while it is pending', async () => {
    const releases: Array<() => void> = [];
    let running = 0;
    let peak = 0;
    const started: string[] = [];
    const sweep = new RollingSweep<string>(1_000, 1_000, 2, (key) => {
      started.push(key);
      running++;
      peak = Math.max(peak, running);
      return new Promise<void>((resolve) =>
        releases.push(() => {
          running--;
          resolve();
        }),
      );
    });
    for (const k of ['a', 'b', 'c', 'd']) sweep.add(k);
    sweep.turn();
    sweep.turn(); // the slot comes round again while everything is still pending
    expect(started).toHaveLength(2);
    while (releases.length > 0) {
      releases.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(peak).toBe(2);
    expect([...started].sort()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('forgets a key that leaves, even while it waits in the queue', async () => {
    const seen: string[] = [];
    const hold: Array<() => void> = [];
    const sweep = new RollingSweep<string>(1_000, 1_000, 1, (key) => {
      seen.push(key);
      return new Promise((resolve) => hold.push(resolve));
    });
    sweep.add('stay');
    sweep.add('leave');
    sweep.turn();
    sweep.delete(seen[0] === 'stay' ? 'leave' : 'stay');
    hold.shift()?.();
    await new Promise((r) => setImmediate(r));
    expect(seen).toHaveLength(1);
    expect(sweep.size).toBe(1);
  });
});
