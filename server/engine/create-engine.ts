import { redisTargetOf, type RedisNodeAddress } from '../redis-target.js';
import type { Engine, EngineOptions } from './engine.js';
import { MemoryEngine } from './memory/memory-engine.js';

export interface EngineSelection extends EngineOptions {
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes; never together with `redisUrl`. */
  redisClusterNodes?: readonly RedisNodeAddress[] | undefined;
}

/**
 * Redis (one server, or a Cluster given by seed nodes) when configured, memory otherwise. The
 * Redis module is loaded only when used.
 */
export async function createEngine(selection: EngineSelection): Promise<Engine> {
  const options: EngineOptions = {
    snapshotEvery: selection.snapshotEvery,
    streamMaxLen: selection.streamMaxLen,
    ...(selection.streamIdleSeconds !== undefined ? { streamIdleSeconds: selection.streamIdleSeconds } : {}),
  };
  const target = redisTargetOf(selection);
  if (!target) return new MemoryEngine(options);
  const { createRedisEngine } = await import('./redis/redis-engine.js');
  return createRedisEngine({ ...target, ...options });
}
