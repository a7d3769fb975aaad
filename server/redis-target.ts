import type { Cluster, Redis, RedisOptions } from 'ioredis';

/**
 * Where the Redis engine and the Redis bus connect: one Redis (`REDIS_URL`) or a Redis Cluster
 * given by seed nodes (`REDIS_CLUSTER_NODES`), and how their connections behave when Redis is in
 * trouble. Shared by the config, the engine and the bus so that all three agree on what a
 * deployment points at.
 */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

export type RedisTarget =
  | { url: string; cluster?: undefined }
  /** Seed nodes: the client asks them for the slot map and then talks to every master. */
  | { cluster: readonly RedisNodeAddress[]; url?: undefined };

/**
 * Parses `host:port,host:port` (IPv6 hosts in brackets: `[::1]:7000`). Throws a message naming
 * the bad entry; an empty list is an error too.
 */
export function parseClusterNodes(value: string): RedisNodeAddress[] {
  const entries = value.split(',').map((s) => s.trim());
  if (entries.every((e) => e === '')) throw new Error('expected host:port[,host:port...]');
  return entries.map((entry) => {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@,]+)):(\d{1,5})$/.exec(entry);
    const host = m?.[1] ?? m?.[2];
    const port = Number(m?.[3]);
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw new Error(`"${entry}" is not host:port (port 1-65535)`);
    }
    return { host, port };
  });
}

/** For logs: the URL with its password masked, or the seed nodes. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.url !== undefined) return target.url.replace(/\/\/[^@]*@/, '//***@');
  return `cluster ${target.cluster.map(formatNode).join(',')}`;
}

export function formatNode(node: RedisNodeAddress): string {
  return node.host.includes(':') ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`;
}

export const BOTH_TARGETS = 'set REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (Redis Cluster seed nodes), not both';

/** The target of a config: one Redis, a cluster, or none (the memory engine). Never both. */
export function redisTargetOf(config: { redisUrl: string | undefined; redisClusterNodes?: readonly RedisNodeAddress[] | undefined }): RedisTarget | undefined {
  const cluster = config.redisClusterNodes && config.redisClusterNodes.length > 0 ? config.redisClusterNodes : undefined;
  if (cluster && config.redisUrl) throw new Error(BOTH_TARGETS);
  if (cluster) return { cluster };
  if (config.redisUrl) return { url: config.redisUrl };
  return undefined;
}

/** STORE_TIMEOUT_MS's default: how long one store call may take before it fails. */
export const DEFAULT_STORE_TIMEOUT_MS = 2_000;

/** Longest pause between reconnect attempts: a restarted Redis is found within a second. */
const MAX_RECONNECT_DELAY_MS = 1_000;

/**
 * ioredis options of every connection (engine and bus, one Redis or each cluster node): a connect
 * attempt is bounded by `storeTimeoutMs`, reconnects back off to 1 s at most, and no command waits
 * for ioredis's retries (about 73 s by default). The engine's commands fail after `storeTimeoutMs`
 * without a reply (command-guard.ts); ioredis's own per-command timeout is only the backstop of
 * the rest (the run id's INFO, publishes), well above it: it times each command from when it was
 * sent, which would fail the tail of a large healthy batch.
 */
export function connectionOptions(storeTimeoutMs: number): RedisOptions {
  return {
    commandTimeout: Math.max(10_000, 5 * storeTimeoutMs),
    connectTimeout: Math.max(storeTimeoutMs, 1_000),
    retryStrategy: (attempt: number) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  };
}

/**
 * QUIT, so that what was sent first still gets its reply, but no longer than `ms`: a stuck Redis
 * answers nothing, not even QUIT (it queues behind the stuck commands), so then disconnect.
 */
export async function quitWithin(conn: Redis | Cluster, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
  const outcome = await Promise.race([
    conn.quit().then(
      () => 'quit' as const,
      () => 'failed' as const,
    ),
    late,
  ]);
  clearTimeout(timer);
  if (outcome !== 'quit') conn.disconnect();
}
