import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { dbReconcileCommand } from '../../server/cli/db-reconcile-command.js';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import type { DbReconcilePage } from '../../server/durable/db-reconcile.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { counts } from './stack.js';

/**
 * The durable tier on a Redis Cluster (3 masters): marks per slot, the drainer walking slots,
 * restore on touch after every master lost its data and after one master came back empty, the
 * cold sweep evicting per slot, and the reconcile against PostgreSQL scanning every master.
 */
describe('durable tier on a Redis Cluster', () => {
  let postgres: PostgresServer;
  let cluster: RedisCluster;
  let server: TestServer;
  let databaseUrl: string;
  const users = Array.from({ length: 12 }, (_, i) => `k${i}`);
  const convs = Array.from({ length: 6 }, (_, i) => `kc${i}`);

  beforeAll(async () => {
    [postgres, cluster] = await Promise.all([startPostgres(), startRedisCluster({ masters: 3 })]);
    databaseUrl = await postgres.createDatabase('cluster');
    server = await startTestServer({ engine: 'redis', redisCluster: cluster, redisPrefix: 'rp', durable: { databaseUrl, run: false, coldAfterSeconds: 1 } });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    await Promise.all([cluster?.stop(), postgres?.stop()]);
  });

  const drain = async (): Promise<void> => {
    await server.durable?.persister.drainAll(Date.now() + 60_000);
  };
  const everyone = (): Promise<UnreadSummary[]> => Promise.all(users.map((uid) => server.unread(uid)));
  const flushAll = async (): Promise<void> => {
    for (const node of cluster.nodes) {
      const probe = cluster.probe(node);
      await probe.flushall();
      probe.disconnect();
    }
  };

  it('every master flushed: every user and conversation comes back from PostgreSQL', async () => {
    for (const [i, conv] of convs.entries()) {
      const members = users.filter((_, u) => (u + i) % 3 !== 0);
      await server.members(conv, { add: members, category: i % 2 === 0 ? 'work' : 'default' });
      for (let seq = 1; seq <= 4; seq++)
        await server.post({ conv, seq, sender: members[seq % members.length] as string, ...(seq === 2 ? { mentions: [members[0] as string] } : {}) });
      await server.ok('POST', `/v1/users/${members[1]}/read`, { conv, seq: 3 });
      await server.ok('PUT', `/v1/users/${members[2]}/conversations/${conv}`, { muted: true });
    }
    const before = await everyone();
    await drain();
    const store = server.engine.durableStore?.();
    if (!store) throw new Error('no durable store');
    expect((await store.backlog(await store.busyShards(0, store.shardCount))).marks).toBe(0);
    await flushAll();
    expect((await everyone()).map(counts)).toEqual(before.map(counts));
    // A message to a conversation every master lost is applied, not refused.
    await server.post({ conv: 'kc1', seq: 5, sender: 'k1' });
  });

  it('one master restarted empty: its users come back, the others are untouched', async () => {
    await drain();
    const before = await everyone();
    const victim = cluster.nodeIndexOf('rp:{u:k3}:m');
    await cluster.restartNode(victim);
    const probe = cluster.probe(cluster.nodes[victim] as (typeof cluster.nodes)[number]);
    expect(await probe.exists('rp:{u:k3}:m')).toBe(0);
    probe.disconnect();
    expect((await everyone()).map(counts)).toEqual(before.map(counts));
  });

  it('the cold sweep evicts per slot and the next touch restores', async () => {
    await drain();
    const before = await everyone();
    const store = server.engine.durableStore?.();
    const durable = server.durable;
    if (!store || !durable) throw new Error('no durable tier');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, pino({ level: 'silent' }), server.server.metrics);
    expect(await sweep.sweepOnce(Date.now() + 60_000)).toBeGreaterThanOrEqual(users.length);
    const master = cluster.probe(cluster.nodes[cluster.nodeIndexOf('rp:{u:k0}:m')] as (typeof cluster.nodes)[number]);
    expect(await master.exists('rp:{u:k0}:m')).toBe(0);
    master.disconnect();
    expect((await everyone()).map(counts)).toEqual(before.map(counts));
  });

  it('reconcile --against-db walks every master and finds Redis and PostgreSQL in agreement', async () => {
    await drain();
    let text = '';
    const args = { users: [], convs: [], all: true, repair: false, rate: 100_000, graceMs: 0, cursor: '', json: true, progress: false };
    const code = await dbReconcileCommand(
      args,
      (t) => void (text += t),
      () => false,
      { REDIS_CLUSTER_NODES: cluster.seeds, DATABASE_URL: databaseUrl },
    );
    const report = JSON.parse(text) as DbReconcilePage;
    expect(report.findings).toEqual([]);
    expect(report.users).toBeGreaterThanOrEqual(users.length);
    expect(report.conversations).toBe(convs.length);
    expect(code).toBe(0);
  });
});
