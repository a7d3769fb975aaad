import type { Redis } from 'ioredis';
import { type Logger, pino } from 'pino';
import { formatNode, type RedisSelection, redisTargetOf, type SentinelTarget } from '../redis-target.js';
import { redisFailure, redisServiceOf } from '../start-failure.js';
import type { Engine, EngineOptions } from './engine.js';
import { MemoryEngine } from './memory/memory-engine.js';
import type { RedisDurableOptions } from './redis/redis-engine.js';
import type { StoreHealth } from './store-health.js';

/** One Redis, a Redis Cluster or Sentinels (never two; see redis-target.ts), or none: memory. */
export interface EngineSelection extends EngineOptions, RedisSelection {
  /** Replicas each acknowledged write must reach (REDIS_WAIT_REPLICAS; 0: none), and how long it waits for them. */
  redisWaitReplicas?: number | undefined;
  redisWaitTimeoutMs?: number | undefined;
  /** Bound of one store call (STORE_TIMEOUT_MS). */
  storeTimeoutMs?: number | undefined;
  /** Hears of every store connection's state changes and failed calls. */
  health?: StoreHealth | undefined;
  /** Start even when Redis may evict keys (REDIS_ALLOW_EVICTION). */
  allowEviction?: boolean | undefined;
  /** Where the start-up check of Redis's settings reports. */
  log?: Logger | undefined;
  /** The durable tier behind the Redis engine (DATABASE_URL); the memory engine takes none. */
  durable?: RedisDurableOptions | undefined;
}

/**
 * Redis (one server, a Cluster given by seed nodes, or the master Sentinels name) when configured, memory otherwise. The
 * Redis module is loaded only when used. On Redis, the servers' settings are checked before the
 * engine is handed out: no persistence is a warning, a policy that evicts keys a refusal.
 */
export async function createEngine(selection: EngineSelection): Promise<Engine> {
  const options: EngineOptions = {
    snapshotEvery: selection.snapshotEvery,
    streamMaxLen: selection.streamMaxLen,
    ...(selection.streamIdleSeconds !== undefined ? { streamIdleSeconds: selection.streamIdleSeconds } : {}),
    ...(selection.badgeMarks ? { badgeMarks: true } : {}),
  };
  const target = redisTargetOf(selection);
  if (!target) {
    if (selection.durable) throw new Error('the durable tier needs a Redis engine (REDIS_URL or REDIS_CLUSTER_NODES)');
    return new MemoryEngine(options);
  }
  const [{ createRedisEngine }, { enforceRedisSettings }] = await Promise.all([import('./redis/redis-engine.js'), import('./redis/settings-check.js')]);
  const engine = await createRedisEngine({
    ...target,
    ...options,
    ...(selection.storeTimeoutMs !== undefined ? { storeTimeoutMs: selection.storeTimeoutMs } : {}),
    ...(selection.health ? { health: selection.health } : {}),
    ...(selection.durable ? { durable: selection.durable } : {}),
    ...(selection.redisWaitReplicas ? { waitReplicas: { count: selection.redisWaitReplicas, timeoutMs: selection.redisWaitTimeoutMs ?? 1_000 } } : {}),
  }).catch((err: unknown) => {
    throw redisFailure(redisServiceOf(target), err);
  });
  try {
    await enforceRedisSettings(engine.masters(), selection.allowEviction ?? false, selection.log ?? pino({ level: 'silent' }), {
      durable: selection.durable !== undefined,
      ...(target.sentinel ? { nameOf: sentinelMasterName(target.sentinel) } : {}),
    });
  } catch (err) {
    await engine.close();
    throw err;
  }
  return engine;
}

/**
 * A master reached through Sentinels, as the configuration names it: its name, the address the
 * Sentinels gave (the connection's peer: its options still hold ioredis's default localhost:6379)
 * and the Sentinels asked.
 */
function sentinelMasterName(sentinel: SentinelTarget): (node: Redis) => string {
  return (node) => {
    const { remoteAddress: host, remotePort: port } = node.stream ?? {};
    const at = host && port ? ` at ${formatNode({ host, port })}` : '';
    return `master ${sentinel.name}${at} (Sentinels ${sentinel.sentinels.map(formatNode).join(',')})`;
  };
}
