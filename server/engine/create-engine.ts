import { pino, type Logger } from 'pino';
import type { StoreHealth } from '../ops/store-health.js';
import { redisTargetOf, type RedisNodeAddress } from '../redis-target.js';
import type { Engine, EngineOptions } from './engine.js';
import type { RedisDurableOptions } from './redis/redis-engine.js';
import { MemoryEngine } from './memory/memory-engine.js';

export interface EngineSelection extends EngineOptions {
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes; never together with `redisUrl`. */
  redisClusterNodes?: readonly RedisNodeAddress[] | undefined;
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
 * Redis (one server, or a Cluster given by seed nodes) when configured, memory otherwise. The
 * Redis module is loaded only when used. On Redis, the servers' settings are checked before the
 * engine is handed out: no persistence is a warning, a policy that evicts keys a refusal.
 */
export async function createEngine(selection: EngineSelection): Promise<Engine> {
  const options: EngineOptions = {
    snapshotEvery: selection.snapshotEvery,
    streamMaxLen: selection.streamMaxLen,
    ...(selection.streamIdleSeconds !== undefined ? { streamIdleSeconds: selection.streamIdleSeconds } : {}),
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
  });
  try {
    await enforceRedisSettings(engine.masters(), selection.allowEviction ?? false, selection.log ?? pino({ level: 'silent' }));
  } catch (err) {
    await engine.close();
    throw err;
  }
  return engine;
}
