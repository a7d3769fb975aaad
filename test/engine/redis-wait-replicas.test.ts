import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { EngineOptions } from '../../server/engine/engine.js';
import { userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { OutcomeUnknownError, StoreUnavailableError } from '../../server/engine/store-errors.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { join, message } from './conformance-helpers.js';

/**
 * REDIS_WAIT_REPLICAS on a real master and replica: a write is handed back only once WAIT, on
 * the connection that wrote, says enough replicas have it; a shortfall is "outcome unknown"
 * (the master has it; a failover may not), never a success. Reads never wait.
 */
interface Pair {
  master: RedisServer;
  replica: RedisServer;
  stop(): Promise<void>;
}

const pair: () => Pair = fileFixture('master and replica', async () => {
  const master = await startRedisServer();
  const replica = await startRedisServer({ extraConfig: [`replicaof 127.0.0.1 ${master.port}`, 'repl-diskless-sync-delay 0'] });
  await synced(replica);
  return { master, replica, stop: async () => void (await Promise.all([master.stop(), replica.stop()])) };
});

async function synced(replica: RedisServer): Promise<void> {
  const probe = new Redis(replica.url);
  try {
    for (const deadline = Date.now() + 15_000; !/^master_link_status:up\r?$/m.test(await probe.info('replication')); ) {
      if (Date.now() > deadline) throw new Error('replica did not sync');
      await delay(25);
    }
  } finally {
    probe.disconnect();
  }
}

const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 50 };
let prefixes = 0;

describe('REDIS_WAIT_REPLICAS', () => {
  it('acknowledges once the replica has the write, and the replica has it', async () => {
    const prefix = `wr${++prefixes}`;
    const engine = await createRedisEngine({ url: pair().master.url, ...OPTS, prefix, waitReplicas: { count: 1, timeoutMs: 500 } });
    try {
      await engine.applyUserOps([join('u', 'c', 0, 'group'), message('u', 'c', 1), message('u', 'c', 2)]);
      const [onMaster, onReplica] = [new Redis(pair().master.url), new Redis(pair().replica.url)];
      try {
        // Acknowledged means on the replica already: read there at once, no waiting.
        const meta = `${prefix}:{u:u}`;
        const keys = (await onMaster.keys(`${prefix}:*`)).sort();
        expect(keys.length).toBeGreaterThan(0);
        expect((await onReplica.keys(`${prefix}:*`)).sort()).toEqual(keys);
        for (const key of keys.filter((k) => k.startsWith(meta) && !k.includes(':s'))) {
          if ((await onMaster.type(key)) === 'hash') expect(await onReplica.hgetall(key), key).toEqual(await onMaster.hgetall(key));
        }
      } finally {
        onMaster.disconnect();
        onReplica.disconnect();
      }
    } finally {
      await engine.close();
    }
  });

  it('more replicas than there are: every write is outcome unknown after the wait, yet applied on the master; reads answer', async () => {
    const engine = await createRedisEngine({ url: pair().master.url, ...OPTS, prefix: `wr${++prefixes}`, waitReplicas: { count: 2, timeoutMs: 300 } });
    try {
      const started = Date.now();
      const err = await engine.applyUserOps([join('u', 'c', 0, 'group'), message('u', 'c', 1)]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OutcomeUnknownError);
      expect((err as OutcomeUnknownError).kind).toBe('noreplicas');
      expect((err as Error).message).toMatch(/only 1 of 2 replicas/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(Date.now() - started).toBeLessThan(2_000);
      // It reached the master (the truth of "outcome unknown"), and reads do not wait.
      const state = await engine.userState('u');
      expect(state.states.find((s) => s.conv === 'c')?.lastSeq).toBe(1);
    } finally {
      await engine.close();
    }
  });

  it('the replica gone: outcome unknown, never a success; back once it returns', async () => {
    const engine = await createRedisEngine({ url: pair().master.url, ...OPTS, prefix: `wr${++prefixes}`, waitReplicas: { count: 1, timeoutMs: 300 } });
    try {
      await engine.applyUserOps([join('u', 'c', 0, 'group'), message('u', 'c', 1)]);
      await pair().replica.kill();
      const err = await engine.applyUserOps([message('u', 'c', 2)]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(OutcomeUnknownError);
      expect((err as OutcomeUnknownError).kind).toBe('noreplicas');
      await pair().replica.restart();
      await synced(pair().replica);
      await engine.applyUserOps([message('u', 'c', 3)]);
      expect((await engine.userState('u')).states.find((s) => s.conv === 'c')?.lastSeq).toBe(3);
    } finally {
      await engine.close();
    }
  });

  it('min-replicas-to-write on a master without its replicas: writes are refused (not applied), never acknowledged', async () => {
    const lonely = await startRedisServer({ extraConfig: ['min-replicas-to-write 1', 'min-replicas-max-lag 10'] });
    const engine = await createRedisEngine({ url: lonely.url, ...OPTS, prefix: 'mr' });
    try {
      const err = await engine.applyUserOps([join('u', 'c', 0, 'group'), message('u', 'c', 1)]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreUnavailableError);
      expect((err as StoreUnavailableError).kind).toBe('noreplicas');
      // Every function is a write to Redis (reads may start an epoch), so reads are refused alike.
      await expect(engine.userState('u')).rejects.toMatchObject({ kind: 'noreplicas' });
      const probe = new Redis(lonely.url);
      expect(await probe.exists(userKeys('mr', 'u').meta, userKeys('mr', 'u').records)).toBe(0);
      probe.disconnect();
    } finally {
      await engine.close();
      await lonely.stop();
    }
  });
});
