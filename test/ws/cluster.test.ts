import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { convKey, userKeys } from '../../server/engine/redis/keys.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { startTestServer } from '../helpers/test-server.js';
import { busPrefix, twoProcessSuite, type WantedId } from './multi-process-suite.js';

/**
 * Two Redpoint processes of one deployment on a 3-master Redis Cluster, as with
 * REDIS_CLUSTER_NODES: the Redis engine on the cluster for state, and sharded pub/sub (SPUBLISH /
 * SSUBSCRIBE) for notifications. The scenarios are in multi-process-suite.ts; here, on top of
 * them, each scenario's ids are picked to span the masters, and each channel must be SSUBSCRIBEd
 * on the master that holds its user's (or conversation's) keys, and nowhere else.
 */
twoProcessSuite('two server processes over one Redis Cluster (sharded pub/sub)', async (defer) => {
  const cluster = await startRedisCluster();
  defer(() => cluster.stop());
  const prefix = `cl${process.pid}`;
  const BUS_PREFIX = busPrefix(prefix);
  const shared = { engine: 'redis' as const, redisCluster: cluster, redisPrefix: prefix, largeGroupThreshold: 3 };
  const a = await startTestServer(shared);
  defer(() => a.close());
  const b = await startTestServer(shared);
  defer(() => b.close());
  for (const s of [a, b]) {
    expect(s.config.redisUrl).toBeUndefined();
    expect(s.config.redisClusterNodes).toEqual(cluster.addresses);
  }
  const probes = cluster.nodes.map((node) => new Redis({ host: '127.0.0.1', port: node.port }));
  defer(() => Promise.allSettled(probes.map((p) => p.quit())));

  /** Subscribers of `channel` on each master: [sharded (SSUBSCRIBE), classic (SUBSCRIBE)]. */
  async function subscribers(channel: string): Promise<[number, number][]> {
    return Promise.all(
      probes.map(async (p) => {
        const shard = (await p.call('PUBSUB', 'SHARDNUMSUB', BUS_PREFIX + channel)) as [string, number];
        const classic = (await p.call('PUBSUB', 'NUMSUB', BUS_PREFIX + channel)) as [string, number];
        return [Number(shard[1]), Number(classic[1])];
      }),
    );
  }

  /**
   * Waits until `count` processes have SSUBSCRIBEd `channel` on the master of its slot, then
   * checks that no other master, and no classic SUBSCRIBE, has it.
   */
  async function subscribed(channel: string, count: number, timeoutMs = 5000): Promise<void> {
    const owner = cluster.nodeIndexOf(BUS_PREFIX + channel);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const counts = await subscribers(channel);
      if ((counts[owner]?.[0] ?? 0) >= count) {
        expect(counts.map(([shard, classic], i) => (i === owner ? [shard >= count, classic] : [shard, classic]))).toEqual(
          counts.map((_, i) => (i === owner ? [true, 0] : [0, 0])),
        );
        return;
      }
      if (Date.now() > deadline) throw new Error(`${channel}: ${JSON.stringify(counts)} subscribers per master, wanted ${count} on master ${owner}`);
      await delay(10);
    }
  }

  /** Fresh ids for one scenario, each on the master it asks for (so the scenario crosses shards on purpose). */
  let n = 0;
  function ids(...wanted: WantedId[]): string[] {
    n++;
    return wanted.map(([name, kind, node]) => {
      expect(node).toBeLessThan(cluster.nodes.length);
      for (let i = 0; ; i++) {
        const id = `${name}-${n}-${i}`;
        const key = kind === 'u' ? userKeys(prefix, id).meta : convKey(prefix, id);
        if (cluster.nodeIndexOf(key) === node) return id;
      }
    });
  }

  return { a, b, subscribed, ids };
});
