import type { ConnectionOptions } from 'node:tls';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { connectionOptions, formatNode, type RedisAccess, type RedisTarget, type SentinelTarget } from '../../redis-target.js';

/**
 * The ioredis clients of a target, built in one place so that the engine and the bus connect the
 * same way: the same credentials and TLS, the same bounded reconnects, and the same rules for
 * following a master that moved.
 *
 * Following the master. Behind Sentinel the client asks the Sentinels for the master's address on
 * every (re)connect, checks on connect that the server it reached says `role:master` (ioredis's
 * ready check; a server that says otherwise is dropped and the Sentinels asked again), and listens
 * on the Sentinels for `+switch-master` (`watchSwitches`), so a master demoted while the
 * connection stays up is left at once instead of at the next error. A reply `READONLY` (a write
 * that reached a replica: a master demoted under a connection, with either kind of target) makes
 * the connection reconnect, without resending: the command is refused, its caller hears "not
 * applied" and retries over the new connection.
 *
 * Not ioredis's own `failoverDetector`: it keeps the detector of every earlier connection
 * subscribed, and one that fires while a reconnect is asking the Sentinels makes that connect
 * fail, which ends the client for good (status `end`, no more reconnects: seen as a Redpoint
 * process answering 503 for ever after a failover).
 */

/** How a connection of the engine or the bus behaves. */
interface ClientSettings {
  storeTimeoutMs: number;
  /** Options of this use (auto-pipelining, offline queue, lazy connect...). */
  extra?: RedisOptions;
}

/** A reply that says the server is a replica now: reconnect (to what the Sentinels name), never resend. */
function reconnectOnReadonly(err: Error): boolean | 1 | 2 {
  return err.message.startsWith('READONLY') ? 1 : false;
}

function tlsOptions(access: RedisAccess | undefined): ConnectionOptions | undefined {
  if (!access?.tls && access?.ca === undefined) return undefined;
  return access.ca !== undefined ? { ca: access.ca } : {};
}

/** Options of every connection to a data node (one Redis, the master Sentinel names, each cluster node). */
function nodeOptions(target: RedisTarget, { storeTimeoutMs, extra }: ClientSettings): RedisOptions {
  const access = target.access;
  const base: RedisOptions = { ...connectionOptions(storeTimeoutMs), reconnectOnError: reconnectOnReadonly, ...extra };
  if (target.url !== undefined) {
    // The URL carries user, password and rediss://; REDIS_TLS_CA_FILE still applies to rediss.
    return target.url.startsWith('rediss:') && access?.ca !== undefined ? { ...base, tls: { ca: access.ca } } : base;
  }
  const tls = access?.tls ? tlsOptions(access) : undefined;
  return {
    ...base,
    ...(access?.username !== undefined ? { username: access.username } : {}),
    ...(access?.password !== undefined ? { password: access.password } : {}),
    ...(tls ? { tls } : {}),
  };
}

/** One Redis, or the master that the Sentinels name. */
export function singleClient(target: RedisTarget & { cluster?: undefined }, settings: ClientSettings): Redis {
  const options = nodeOptions(target, settings);
  if (target.url !== undefined) return new Redis(target.url, options);
  const { sentinel, access } = target;
  const tls = access?.tls ? tlsOptions(access) : undefined;
  const client = new Redis({
    ...options,
    sentinels: sentinel.sentinels.map((s) => ({ host: s.host, port: s.port })),
    name: sentinel.name,
    role: 'master',
    // A Sentinel that does not answer must not hold the (re)connect: ask the next one.
    sentinelCommandTimeout: settings.storeTimeoutMs,
    // Never give up asking (a connector that gives up ends the client for good).
    sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 100, 1_000),
    ...sentinelAccess(access),
    ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: tls } : {}),
  });
  watchSwitches(client, target.sentinel, access, settings.storeTimeoutMs);
  return client;
}

function sentinelAccess(access: RedisAccess | undefined): RedisOptions {
  return {
    ...(access?.sentinelUsername !== undefined ? { sentinelUsername: access.sentinelUsername } : {}),
    ...(access?.sentinelPassword !== undefined ? { sentinelPassword: access.sentinelPassword } : {}),
  };
}

/**
 * Subscribes to `+switch-master` on every Sentinel and drops the client's connection when its
 * master was replaced (`<name> <old ip> <old port> <new ip> <new port>`) and the connection is
 * not already to the new one. Only a READY connection is dropped, as a network error would drop
 * it: ioredis then reconnects through the Sentinels, which name the new master. A connection
 * being made is left alone: it asks the Sentinels anyway, and the role check refuses a replica.
 * The subscriptions end with the client.
 */
function watchSwitches(client: Redis, sentinel: SentinelTarget, access: RedisAccess | undefined, storeTimeoutMs: number): void {
  const tls = access?.tls ? tlsOptions(access) : undefined;
  const subscribers = sentinel.sentinels.map((address) => {
    const sub = new Redis({
      host: address.host,
      port: address.port,
      ...connectionOptions(storeTimeoutMs),
      ...(access?.sentinelUsername !== undefined ? { username: access.sentinelUsername } : {}),
      ...(access?.sentinelPassword !== undefined ? { password: access.sentinelPassword } : {}),
      ...(tls ? { tls } : {}),
      // Sentinels answer INFO differently; the subscription is all this connection is for.
      enableReadyCheck: false,
    });
    sub.on('error', () => undefined); // a Sentinel down: the others still tell, reconnects go on
    sub.subscribe(SWITCH_MASTER).catch(() => undefined);
    sub.on('message', (channel: string, message: string) => {
      if (channel !== SWITCH_MASTER) return;
      const [name, , , host, port] = message.split(' ');
      if (name !== sentinel.name || client.status !== 'ready') return;
      const stream = client.stream;
      if (stream.remoteAddress === host && String(stream.remotePort) === port) return;
      stream.destroy();
    });
    return sub;
  });
  client.once('end', () => {
    for (const sub of subscribers) sub.disconnect();
  });
}

const SWITCH_MASTER = '+switch-master';

/** A Redis Cluster client; its node connections get the access settings of the target. */
export function clusterClient(target: RedisTarget & { cluster: RedisTarget['cluster'] & object }, settings: ClientSettings, options: ClusterOptions): Cluster {
  return new Cluster([...target.cluster], { ...options, redisOptions: nodeOptions(target, settings) });
}

/** `host:port` of a connection, or `sentinel:<name>` for one that follows whatever master the Sentinels name. */
export function clientAddress(target: RedisTarget, client: Redis): string {
  if (target.sentinel !== undefined) return `sentinel:${target.sentinel.name}`;
  const { host, port } = client.options;
  return formatNode({ host: host ?? '127.0.0.1', port: port ?? 6379 });
}
