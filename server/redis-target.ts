import type { Cluster, Redis, RedisOptions } from 'ioredis';

/**
 * Where the Redis engine and the Redis bus connect: one Redis (`REDIS_URL`), a Redis Cluster
 * given by seed nodes (`REDIS_CLUSTER_NODES`) or the master a set of Sentinels names
 * (`REDIS_SENTINELS`), with the credentials and TLS settings of those connections, and how they
 * behave when Redis is in trouble. Shared by the config, the engine and the bus so that all three
 * agree on what a deployment points at.
 */
export interface RedisNodeAddress {
  host: string;
  port: number;
}

/**
 * Credentials and TLS of the data connections (cluster nodes, or the master Sentinel names) and
 * of the Sentinels. A `REDIS_URL` carries its own (`redis://user:pass@`, `rediss://`); only `ca`
 * applies to it as well.
 */
export interface RedisAccess {
  /** ACL user (Redis 6+); unset: `default`. */
  username?: string | undefined;
  password?: string | undefined;
  /** TLS to the data nodes and the Sentinels. */
  tls?: boolean | undefined;
  /** PEM certificates to trust instead of the system's (REDIS_TLS_CA_FILE's contents). */
  ca?: string | undefined;
  /** The Sentinels' own ACL user and password (Sentinel's `requirepass` / `user`), if they have one. */
  sentinelUsername?: string | undefined;
  sentinelPassword?: string | undefined;
}

/** The Sentinels to ask, and the name of the master they watch (`sentinel monitor <name> ...`). */
export interface SentinelTarget {
  sentinels: readonly RedisNodeAddress[];
  name: string;
}

export type RedisTarget = (
  | { url: string; cluster?: undefined; sentinel?: undefined }
  /** Seed nodes: the client asks them for the slot map and then talks to every master. */
  | { cluster: readonly RedisNodeAddress[]; url?: undefined; sentinel?: undefined }
  /** The master that the Sentinels name; followed across failovers. */
  | { sentinel: SentinelTarget; url?: undefined; cluster?: undefined }
) & { access?: RedisAccess | undefined };

/** REDIS_SENTINEL_MASTER's default, Sentinel's own example name. */
const DEFAULT_SENTINEL_MASTER = 'mymaster';

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
  if (target.sentinel !== undefined) return `sentinel ${target.sentinel.name}@${target.sentinel.sentinels.map(formatNode).join(',')}`;
  return `cluster ${target.cluster.map(formatNode).join(',')}`;
}

export function formatNode(node: RedisNodeAddress): string {
  return node.host.includes(':') ? `[${node.host}]:${node.port}` : `${node.host}:${node.port}`;
}

export const BOTH_TARGETS =
  'set one of REDIS_URL (one Redis), REDIS_CLUSTER_NODES (Redis Cluster seed nodes) or REDIS_SENTINELS (Sentinels of a master), not two';

/** What a config says about Redis (server/config.ts's fields of the same names). */
export interface RedisSelection {
  redisUrl: string | undefined;
  redisClusterNodes?: readonly RedisNodeAddress[] | undefined;
  redisSentinels?: readonly RedisNodeAddress[] | undefined;
  redisSentinelMaster?: string | undefined;
  redisAccess?: RedisAccess | undefined;
}

/** The target of a config: one Redis, a cluster, a Sentinel-watched master, or none (the memory engine). Never two. */
export function redisTargetOf(config: RedisSelection): RedisTarget | undefined {
  const cluster = config.redisClusterNodes && config.redisClusterNodes.length > 0 ? config.redisClusterNodes : undefined;
  const sentinels = config.redisSentinels && config.redisSentinels.length > 0 ? config.redisSentinels : undefined;
  if ([cluster, sentinels, config.redisUrl].filter((t) => t !== undefined && t !== '').length > 1) throw new Error(BOTH_TARGETS);
  const access = config.redisAccess ? { access: config.redisAccess } : {};
  if (cluster) return { cluster, ...access };
  if (sentinels) return { sentinel: { sentinels, name: config.redisSentinelMaster ?? DEFAULT_SENTINEL_MASTER }, ...access };
  if (config.redisUrl) return { url: config.redisUrl, ...access };
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
