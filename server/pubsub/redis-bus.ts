import { Cluster, Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { StoreHealth } from '../ops/store-health.js';
import { redisAddress, watchCluster, watchRedis } from '../ops/watch-redis.js';
import { connectionOptions, DEFAULT_STORE_TIMEOUT_MS, quitWithin, type RedisNodeAddress, type RedisTarget } from '../redis-target.js';
import type { Bus } from './bus.js';

/** Where the bus reports its connections' state and its failed calls, and how long a call may take. */
export interface BusOptions {
  health?: StoreHealth;
  storeTimeoutMs?: number;
}

const ORIGIN_BYTES = 10;

/** How bus messages travel: classic pub/sub on one Redis, sharded pub/sub on a Redis Cluster. */
interface Transport {
  publish(channel: string, message: Buffer): Promise<unknown>;
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /** Resolves once the subscribe commands sent so far are acknowledged. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

type Receive = (channel: Buffer, message: Buffer) => void;

/**
 * PUBLISH on one connection, SUBSCRIBE on another (a subscribed connection takes no PUBLISH). The
 * publishing connection has no offline queue: during an outage a notification fails at once
 * (pulls repair it) instead of piling up in memory to be sent late.
 */
function singleTransport(url: string, receive: Receive, health: StoreHealth, timeoutMs: number): Transport {
  const pub = new Redis(url, { ...connectionOptions(timeoutMs), enableAutoPipelining: true, lazyConnect: false, enableOfflineQueue: false });
  const sub = new Redis(url, { ...connectionOptions(timeoutMs), lazyConnect: false });
  watchRedis(health, `bus-publish@${redisAddress(pub)}`, pub);
  watchRedis(health, `bus-subscribe@${redisAddress(sub)}`, sub);
  sub.on('messageBuffer', receive);
  return {
    publish: (channel, message) => pub.publish(channel, message),
    subscribe: (channel) => sub.subscribe(channel),
    unsubscribe: (channel) => sub.unsubscribe(channel),
    // Replies come in order on the subscriber connection: the PING's comes after every SUBSCRIBE's.
    settled: async () => {
      await sub.ping().catch(() => undefined);
    },
    close: async () => {
      await Promise.all([pub, sub].map((conn) => quitWithin(conn, timeoutMs)));
    },
  };
}

/**
 * Sharded pub/sub (Redis 7): SPUBLISH goes to the master of the channel's slot, and only that
 * master's subscribers hear it, so notification traffic scales with the shards instead of being
 * broadcast over the cluster bus to every node as PUBLISH is. ioredis's Cluster with
 * `shardedSubscribers` keeps one subscriber connection per master, sends each SSUBSCRIBE to the
 * master of its slot and subscribes again after a failover, restart or resharding.
 */
function clusterTransport(nodes: readonly RedisNodeAddress[], receive: Receive, health: StoreHealth, timeoutMs: number): Transport {
  const cluster = new Cluster([...nodes], {
    shardedSubscribers: true,
    enableAutoPipelining: true,
    lazyConnect: false,
    redisOptions: connectionOptions(timeoutMs),
  });
  // A Cluster emits 'error' (e.g. a subscriber that cannot connect) and an unheard 'error' event
  // throws. Lost notifications are repaired by pulls; StoreHealth reports each node's state.
  cluster.on('error', () => undefined);
  watchCluster(health, 'bus', cluster);
  cluster.on('smessageBuffer', receive);
  return {
    publish: (channel, message) => cluster.spublish(channel, message),
    subscribe: (channel) => cluster.ssubscribe(channel),
    unsubscribe: (channel) => cluster.sunsubscribe(channel),
    // Each SSUBSCRIBE's promise resolves with its acknowledgement; subscribe() already waits for it.
    settled: async () => undefined,
    close: async () => {
      await quitWithin(cluster, timeoutMs);
    },
  };
}

/**
 * Cross-process bus on Redis pub/sub: classic PUBLISH/SUBSCRIBE on one Redis, sharded
 * SPUBLISH/SSUBSCRIBE on a Redis Cluster. Each payload is prefixed with the publishing process's
 * id so a process ignores its own echo (the fanout delivered locally, without a round trip).
 * Channel names carry the same hash tags as the data keys (`rp:bus:{u:<uid>}`), so on a cluster
 * each user's notifications go through the shard that holds the user's keys.
 */
export class RedisBus implements Bus {
  private readonly origin = Buffer.from(nanoid(ORIGIN_BYTES));
  private readonly transport: Transport;
  private readonly local = new Set<string>();
  /** SUBSCRIBEs not yet acknowledged, so concurrent callers wait on the same one. */
  private readonly pending = new Map<string, Promise<void>>();
  private handler: ((channel: string, payload: Uint8Array) => void) | undefined;
  private readonly health: StoreHealth;

  /** `target`: a `redis://` URL or a RedisTarget (one Redis, or a cluster's seed nodes). */
  constructor(target: string | RedisTarget, private readonly prefix = 'rp:bus:', options: BusOptions = {}) {
    const timeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.health = options.health ?? new StoreHealth(undefined, undefined, timeoutMs);
    const receive: Receive = (channel, message) => {
      if (message.subarray(0, ORIGIN_BYTES).equals(this.origin)) return;
      const name = channel.toString().slice(this.prefix.length);
      if (this.local.has(name)) this.handler?.(name, message.subarray(ORIGIN_BYTES));
    };
    const t: RedisTarget = typeof target === 'string' ? { url: target } : target;
    this.transport =
      t.url !== undefined ? singleTransport(t.url, receive, this.health, timeoutMs) : clusterTransport(t.cluster, receive, this.health, timeoutMs);
  }

  publish(channel: string, payload: Uint8Array): void {
    const framed = Buffer.concat([this.origin, payload]);
    this.transport.publish(this.prefix + channel, framed).catch(() => {
      // Lost cross-process notifications are repaired by pulls (gaps, safety-net version frames).
      this.health.busFailed('publish');
    });
  }

  subscribe(channel: string): Promise<void> {
    const inFlight = this.pending.get(channel);
    if (inFlight) return inFlight;
    if (this.local.has(channel)) return Promise.resolve();
    this.local.add(channel);
    const done = this.transport
      .subscribe(this.prefix + channel)
      .then(
        () => undefined,
        () => {
          // Pushes on this channel are lost until the next subscribe; pulls still repair.
          this.local.delete(channel);
          this.health.busFailed('subscribe');
        },
      )
      .finally(() => this.pending.delete(channel));
    this.pending.set(channel, done);
    return done;
  }

  unsubscribe(channel: string): void {
    if (!this.local.delete(channel)) return;
    this.transport.unsubscribe(this.prefix + channel).catch(() => undefined);
  }

  onMessage(handler: (channel: string, payload: Uint8Array) => void): void {
    this.handler = handler;
  }

  /** Resolves once pending subscribes are acknowledged (tests wait on it instead of sleeping). */
  async settled(): Promise<void> {
    await Promise.all([...this.pending.values()]);
    await this.transport.settled();
  }

  async close(): Promise<void> {
    this.local.clear();
    await this.transport.close();
  }
}
