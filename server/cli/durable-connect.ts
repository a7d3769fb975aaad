import { pino } from 'pino';
import { loadConfig } from '../config.js';
import { DurableTier } from '../durable/durable-tier.js';
import { createEngine } from '../engine/create-engine.js';
import type { DurableStore } from '../engine/durable-backing.js';
import type { Engine } from '../engine/engine.js';
import { storeTarget, streamOptions, UsageError } from './connect.js';

export interface DurableConnection {
  tier: DurableTier;
  engine: Engine;
  store: DurableStore;
}

/**
 * The commands that work on Redis and PostgreSQL side by side (`restore`, `reconcile --against-db`)
 * reach both directly, as the server does (REDIS_URL or REDIS_CLUSTER_NODES, DATABASE_URL), and
 * close both after `work`. `onRestore` hears of every user or conversation a touch restored.
 */
export async function withDurableEngine<T>(
  command: string,
  env: NodeJS.ProcessEnv,
  work: (c: DurableConnection) => Promise<T>,
  onRestore?: (kind: 'user' | 'conversation', n: number) => void,
): Promise<T> {
  const config = loadConfig(env);
  if (!config.durable) throw new UsageError(`${command} needs DATABASE_URL (the durable tier) and REDIS_URL or REDIS_CLUSTER_NODES`);
  const tier = await DurableTier.open(config.durable, pino({ level: 'silent' }));
  try {
    const engine = await createEngine({
      ...storeTarget(config),
      ...streamOptions(config),
      durable: { backing: tier.pg, activityEveryMs: tier.activityEveryMs, ...(onRestore ? { onRestore } : {}) },
    });
    try {
      const store = engine.durableStore?.();
      if (!store) throw new Error('the durable tier needs the Redis engine');
      return await work({ tier, engine, store });
    } finally {
      await engine.close();
    }
  } finally {
    await tier.close();
  }
}
