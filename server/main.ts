import { startServer } from './app.js';
import { ConfigError, DEV_API_KEY, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { describeRedisTarget, redisTargetOf } from './redis-target.js';

let config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`redpoint: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
const log = createLogger(config.logLevel);
const redis = redisTargetOf(config); // loadConfig already refused REDIS_URL with REDIS_CLUSTER_NODES
const where = redis ? describeRedisTarget(redis) : undefined;
log.info(
  { engine: redis ? 'redis' : 'memory', redis: where },
  redis
    ? `engine: redis${redis.cluster ? ' cluster (sharded pub/sub)' : ''}`
    : 'engine: memory (in-process; state is lost on restart — set REDIS_URL or REDIS_CLUSTER_NODES for durability)',
);
if (config.devMode) {
  log.warn(
    { apiKey: DEV_API_KEY, host: config.host },
    'DEV MODE: no REDPOINT_API_KEY/REDPOINT_JWT_SECRET set; using published dev credentials and binding 127.0.0.1 only. Mint a client token with `npm run token -- <uid>`.',
  );
}

let server;
try {
  server = await startServer(config, log);
} catch (err) {
  // A start-up failure (store unreachable, port taken, native module) is one clear line, not a stack.
  const reason = err instanceof Error ? err.message : String(err);
  log.fatal({ err: reason }, `cannot start: ${reason}${where ? ` (is Redis reachable at ${where}?)` : ''}`);
  process.exit(1);
}
log.info({ host: config.host, port: server.port }, `listening on http://${config.host}:${server.port}`);

let stopping = false;
const stop = async (signal: string): Promise<void> => {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, 'shutting down: refusing new work, draining in-flight writes');
  const force = setTimeout(() => {
    log.error('shutdown took longer than 10 s; exiting');
    process.exit(1);
  }, 10_000);
  force.unref();
  await server.close();
  log.info('bye');
  process.exit(0);
};
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
