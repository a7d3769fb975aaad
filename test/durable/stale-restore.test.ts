import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import type { PersistedConversation, PersistedUser } from '../../server/engine/durable-backing.js';
import type { TestServer } from '../helpers/test-server.js';
import { durableStack } from './stack.js';

/**
 * A restore reads PostgreSQL, then writes Redis. If, in between, another process restores the
 * same user (or conversation), changes it, drains the change and the sweep evicts it again, what
 * the first restore read is older than PostgreSQL — and Redis lacks the key again, so "already
 * there" does not stop it. The eviction's stamp (keys.ts evictedKey) does: the restore compares
 * the stamp it saw before its read with the one there now, and reads again.
 */
describe('durable tier: a restore that read PostgreSQL before an evict, restore, change, drain, evict cycle', () => {
  const stack = durableStack('stalerestore', [
    { redisPrefix: 'sr', durable: { coldAfterSeconds: 1, run: false } },
    { redisPrefix: 'sr', durable: { coldAfterSeconds: 1, run: false } },
  ]);
  const silent = pino({ level: 'silent' });
  const later = () => Date.now() + 3_600_000;

  function parts(server: TestServer) {
    const durable = server.durable;
    const store = server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    return {
      pg: durable.tier.pg,
      drain: () => durable.persister.drainAll(Date.now() + 20_000),
      sweep: () => new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, server.server.metrics).sweepOnce(later()),
    };
  }

  /** Holds `server`'s next PostgreSQL read of what `pick` selects until `release` is called, after the read. */
  function pauseAfterRead<K extends 'loadUsers' | 'loadConversations'>(server: TestServer, method: K, wanted: string) {
    const pg = parts(server).pg;
    const original = pg[method].bind(pg) as (ids: readonly string[]) => Promise<Map<string, PersistedUser | PersistedConversation>>;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let reached: () => void = () => undefined;
    const read = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let reads = 0;
    Object.defineProperty(pg, method, {
      configurable: true,
      value: async (ids: readonly string[]) => {
        const result = await original(ids);
        if (ids.includes(wanted)) {
          reads++;
          if (reads === 1) {
            reached();
            await released;
          }
        }
        return result;
      },
    });
    return {
      read,
      release,
      reads: () => reads,
      restore: () => Reflect.deleteProperty(pg, method),
    };
  }

  it('a user: the first restore reads again and keeps the read position the other process drained', async () => {
    const [a, b] = stack.servers as [TestServer, TestServer];
    await a.members('sr-c1', { add: ['sr-u1', 'sr-v1'] });
    await a.post([
      { conv: 'sr-c1', seq: 1, sender: 'sr-v1' },
      { conv: 'sr-c1', seq: 2, sender: 'sr-v1' },
    ]);
    await parts(a).drain();
    expect(await parts(a).sweep()).toBeGreaterThanOrEqual(2);
    expect(await stack.admin.exists('sr:{u:sr-u1}:m')).toBe(0);

    const pause = pauseAfterRead(a, 'loadUsers', 'sr-u1');
    try {
      // A touches the evicted user: its restore has read PostgreSQL (2 unread) and waits.
      const first = a.unread('sr-u1');
      await pause.read;
      // Meanwhile B restores it, reads both messages, drains, and the sweep evicts it again.
      expect((await b.unread('sr-u1')).total).toBe(2);
      await b.ok('POST', '/v1/users/sr-u1/read', { conv: 'sr-c1', seq: 2 });
      await parts(b).drain();
      expect(await parts(b).sweep()).toBeGreaterThanOrEqual(1);
      expect(await stack.admin.exists('sr:{u:sr-u1}:m')).toBe(0);
      pause.release();
      const seen = await first;
      expect(seen.conversations.find((c) => c.conv === 'sr-c1')).toMatchObject({ readSeq: 2, unread: 0 });
      expect(seen.total).toBe(0);
      expect((await b.unread('sr-u1')).total).toBe(0);
      expect(pause.reads()).toBe(2);
    } finally {
      pause.release();
      pause.restore();
    }
  });

  it('a conversation: the first restore reads again and keeps the member the other process added', async () => {
    const [a, b] = stack.servers as [TestServer, TestServer];
    await a.members('sr-c2', { add: ['sr-u2', 'sr-v2'] });
    await a.post({ conv: 'sr-c2', seq: 1, sender: 'sr-v2' });
    await parts(a).drain();
    await parts(a).sweep();
    expect(await stack.admin.exists('sr:{c:sr-c2}')).toBe(0);

    const pause = pauseAfterRead(a, 'loadConversations', 'sr-c2');
    try {
      // A message to the evicted conversation: its restore has read the roster of two and waits.
      const first = a.post({ conv: 'sr-c2', seq: 2, sender: 'sr-v2' });
      await pause.read;
      // B restores it by adding a member, drains the roster, and the sweep evicts everyone again.
      await b.members('sr-c2', { add: ['sr-w2'] });
      await parts(b).drain();
      await parts(b).sweep();
      expect(await stack.admin.exists('sr:{c:sr-c2}')).toBe(0);
      pause.release();
      await first;
      // The message reached the member B added: the roster A wrote is the one PostgreSQL holds now.
      expect(await stack.admin.hexists('sr:{c:sr-c2}', 'sr-w2')).toBe(1);
      expect((await a.unread('sr-w2')).conversations.find((c) => c.conv === 'sr-c2')).toMatchObject({ lastSeq: 2 });
      expect(pause.reads()).toBe(2);
    } finally {
      pause.release();
      pause.restore();
    }
  });

  it('an evicted set from before the stamps is converted at start, its members kept', async () => {
    const store = stack.server.engine.durableStore?.();
    if (!store) throw new Error('no durable tier');
    const members = Array.from({ length: 2_500 }, (_, i) => `sr-old${i}`);
    await stack.admin.sadd('sr:ev', ...members, '#sr-oldc');
    await stack.admin.zadd('sr:ez', '1733000000000001', 'sr-old7');
    await store.markIntact(false);
    expect(await stack.admin.exists('sr:ev')).toBe(0);
    expect(await stack.admin.zscore('sr:ez', 'sr-old0')).toBe('0');
    expect(await stack.admin.zscore('sr:ez', '#sr-oldc')).toBe('0');
    // A real stamp is kept.
    expect(await stack.admin.zscore('sr:ez', 'sr-old7')).toBe('1733000000000001');
    expect(await stack.admin.zmscore('sr:ez', ...members)).not.toContain(null);
  });
});
