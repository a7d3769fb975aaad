import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { RedisTarget } from '../../server/redis-target.js';
import { freePort } from '../../test/helpers/processes.js';
import { startRedisCluster } from '../../test/helpers/redis-cluster.js';
import { type RedisServer, startRedisServer } from '../../test/helpers/redis-server.js';
import { statsConnection } from './redis-info.js';

/** A store for a scenario: one Redis, or a Redis Cluster of N masters, with a stats connection per server. */
export interface BenchRedis {
  readonly label: string;
  readonly target: RedisTarget;
  readonly servers: readonly RedisServer[];
  /** One plain connection per server (INFO, MEMORY): never the engine's. */
  readonly stats: readonly Redis[];
  stop(): Promise<void>;
}

export async function startBenchRedis(kind: { masters: 0 | number }): Promise<BenchRedis> {
  if (kind.masters === 0) {
    const server = await startRedisServer();
    return wrap('one Redis', { url: server.url }, [server], () => server.stop());
  }
  if (kind.masters === 1) {
    const server = await startOneMasterCluster();
    return wrap('cluster, 1 master', { cluster: [{ host: '127.0.0.1', port: server.port }] }, [server], () => server.stop());
  }
  const cluster = await startRedisCluster({ masters: kind.masters });
  return wrap(`cluster, ${kind.masters} masters`, { cluster: cluster.addresses }, cluster.nodes, () => cluster.stop());
}

function wrap(label: string, target: RedisTarget, servers: readonly RedisServer[], stop: () => Promise<void>): BenchRedis {
  const stats = servers.map((s) => statsConnection(s.url));
  return {
    label,
    target,
    servers,
    stats,
    async stop() {
      for (const s of stats) s.disconnect();
      await stop();
    },
  };
}

const CLUSTER_OK_TIMEOUT_MS = 20_000;

/**
 * A Redis Cluster of one master (redis-cli --cluster create wants three): one cluster-enabled
 * redis-server that takes every slot itself (and announces 127.0.0.1: alone, it never learns its address from a peer). The same engine code path as a bigger cluster
 * (Cluster client, sharded pub/sub, slot routing), on one server.
 */
async function startOneMasterCluster(): Promise<RedisServer> {
  const busPort = await freePort();
  const server = await startRedisServer({
    extraConfig: ['cluster-enabled yes', 'cluster-config-file nodes.conf', `cluster-port ${busPort}`, 'cluster-announce-ip 127.0.0.1'],
  });
  const r = statsConnection(server.url);
  try {
    await r.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    const deadline = Date.now() + CLUSTER_OK_TIMEOUT_MS;
    while (!/^cluster_state:ok\r?$/m.test((await r.call('CLUSTER', 'INFO')) as string)) {
      if (Date.now() > deadline) throw new Error('one-master cluster: cluster_state not ok');
      await delay(25);
    }
  } catch (err) {
    await server.stop();
    throw err;
  } finally {
    r.disconnect();
  }
  return server;
}
