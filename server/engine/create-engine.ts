import type { Engine, EngineOptions } from './engine.js';
import { MemoryEngine } from './memory/memory-engine.js';

export interface EngineSelection extends EngineOptions {
  redisUrl: string | undefined;
}

/** Redis when a URL is configured, memory otherwise. The Redis module is loaded only when used. */
export async function createEngine(selection: EngineSelection): Promise<Engine> {
  const options: EngineOptions = { snapshotEvery: selection.snapshotEvery, streamMaxLen: selection.streamMaxLen };
  if (!selection.redisUrl) return new MemoryEngine(options);
  const { createRedisEngine } = await import('./redis/redis-engine.js');
  return createRedisEngine({ url: selection.redisUrl, ...options });
}
