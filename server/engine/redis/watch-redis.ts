import type { Cluster, Redis } from 'ioredis';
import type { StoreHealth } from '../store-health.js';

/** `host:port` of an ioredis connection, as the targets of StoreHealth name it. */
export function redisAddress(conn: Redis): string {
  const { host, port } = conn.options;
  return host?.includes(':') ? `[${host}]:${port}` : `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/**
 * Reports one ioredis connection's state changes to `health` under `target`. Its 'error' listener
 * also keeps ioredis from printing "[ioredis] Unhandled error event" for every failed reconnect.
 */
export function watchRedis(health: StoreHealth, target: string, conn: Redis): void {
  conn.on('error', (err: unknown) => health.sawError(target, err));
  conn.on('ready', () => health.up(target));
  // A connection that was never ready (refused from the start) goes down as well: 'close' follows.
  conn.on('close', () => health.down(target));
}

/**
 * A Redis Cluster client: the cluster as a whole (`<role>@cluster`: slot map reachable) and each
 * node connection of its pool (`<role>@host:port`, masters and any replicas), as they are opened
 * and until the client drops them.
 */
export function watchCluster(health: StoreHealth, role: string, cluster: Cluster): void {
  const whole = `${role}@cluster`;
  cluster.on('error', (err: unknown) => health.sawError(whole, err));
  cluster.on('ready', () => health.up(whole));
  cluster.on('close', () => health.down(whole));
  cluster.on('+node', (node: Redis) => watchRedis(health, `${role}@${redisAddress(node)}`, node));
  // A dropped node's connection closes first (its 'close' marks it down); then it is no target at all.
  cluster.on('-node', (node: Redis) => setImmediate(() => health.forget(`${role}@${redisAddress(node)}`)));
  cluster.on('node error', (err: unknown, key: string) => health.sawError(`${role}@${key}`, err));
}
