import { pino } from 'pino';
import { LocalToolbox, type Toolbox } from '../admin/toolbox.js';
import { type Config, DEV_API_KEY, loadConfig } from '../config.js';
import { DurableTier } from '../durable/durable-tier.js';
import { adminOf } from '../engine/admin.js';
import { createEngine } from '../engine/create-engine.js';
import { describeRedisTarget, redisTargetOf } from '../redis-target.js';
import { HttpToolbox } from './http-toolbox.js';

export class UsageError extends Error {
  override name = 'UsageError';
}

export interface Connection {
  toolbox: Toolbox;
  /** For the report: where the commands went. */
  where: string;
}

/**
 * The store the commands act on: with `--url`, a running server's operator endpoints (the API key
 * from REDPOINT_API_KEY, or the dev key); otherwise the store the server's own environment names
 * (REDIS_URL or REDIS_CLUSTER_NODES, with the same SNAPSHOT_EVERY, STREAM_*, LARGE_GROUP_THRESHOLD
 * as the server), reached directly through the same Engine.
 */
export async function connect(url: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<Connection> {
  if (url !== undefined) {
    if (!/^https?:\/\//.test(url)) throw new UsageError(`--url wants http(s)://host:port, got ${url}`);
    return { toolbox: new HttpToolbox(url, env.REDPOINT_API_KEY ?? DEV_API_KEY), where: url };
  }
  const config = loadConfig(env);
  const target = redisTargetOf(config);
  if (!target) {
    throw new UsageError(
      "no store: set REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS (as for the server), or pass --url http://host:port of a running server (a memory engine's store lives only in its process)",
    );
  }
  const options = streamOptions(config);
  // With the durable tier, the commands restore what Redis lacks and erase from PostgreSQL too.
  const tier = config.durable ? await DurableTier.open(config.durable, pino({ level: 'silent' })) : undefined;
  const engine = await createEngine({
    ...storeTarget(config),
    ...options,
    durable: tier && { backing: tier.pg, activityEveryMs: tier.activityEveryMs },
  }).catch(async (err: unknown) => {
    await tier?.close();
    throw err;
  });
  const toolbox = new LocalToolbox(engine, adminOf(engine), { ...options, largeGroupThreshold: config.largeGroupThreshold, durableErase: tier?.pg }, true);
  if (tier) {
    const close = toolbox.close.bind(toolbox);
    toolbox.close = async () => {
      await close();
      await tier.close();
    };
  }
  return { toolbox, where: describeRedisTarget(target) };
}

/** The store the server's configuration names, as the CLI reaches it. */
export function storeTarget(config: Config) {
  return {
    redisUrl: config.redisUrl,
    redisClusterNodes: config.redisClusterNodes,
    redisSentinels: config.redisSentinels,
    redisSentinelMaster: config.redisSentinelMaster,
    redisAccess: config.redisAccess,
  };
}

/** The per-user stream settings the server's configuration gives its engine. */
export function streamOptions(config: Config) {
  return {
    snapshotEvery: config.snapshotEvery,
    streamMaxLen: config.streamMaxLen,
    ...(config.streamIdleSeconds !== undefined ? { streamIdleSeconds: config.streamIdleSeconds } : {}),
  };
}
