import { type RunningServer, shutdownBoundMs, startServer } from './app.js';
import { type Config, ConfigError, DEV_API_KEY, describeConfig, loadConfig, workerCount } from './config.js';
import { loadRouteHook } from './gateway/route-hook.js';
import { loadedUws } from './gateway/uws.js';
import { createLogger } from './logger.js';
import { VERSION } from './ops/build-info.js';
import { describeRedisTarget, redisTargetOf } from './redis-target.js';
import { exitAtOnce, StopSignals } from './stop-signals.js';
import { missingFromCommandLine } from './v8-flags.js';
import { runWorkers } from './workers/supervisor.js';

export interface RunOptions {
  /**
   * A module exporting `registerRoutes` (a RouteHook, see gateway/route-hook.ts) whose routes are
   * added to every worker's server: how the dev entry adds the demo page without the production
   * entry importing it.
   */
  routesModule?: string;
}

/**
 * Runs Redpoint as a process: configuration from the environment, one server or WORKERS worker
 * threads, signals. server/main.ts (production) and client-demo/dev-server.ts (`npm start`) call it.
 */
export async function runRedpoint(options: RunOptions = {}): Promise<void> {
  const signals = new StopSignals();
  const config = configOrExit();
  const log = createLogger(config.logLevel);
  const redis = redisTargetOf(config); // loadConfig already refused REDIS_URL with REDIS_CLUSTER_NODES
  const where = redis ? describeRedisTarget(redis) : undefined;
  // The first line a person sees stays short and says how to read the rest; the configuration
  // (a long object) comes on a line of its own.
  log.info(
    { event: 'startup', version: VERSION, node: process.version, pid: process.pid },
    `redpoint ${VERSION} starting (node ${process.version}, pid ${process.pid}); logs are JSON lines: pipe them through \`npx pino-pretty\` to read them`,
  );
  log.info({ event: 'config', config: describeConfig(config) }, 'configuration (secrets masked)');
  log.info(
    { event: 'uws', build: loadedUws.build, version: loadedUws.version, path: loadedUws.path },
    `uWebSockets.js: ${loadedUws.build} ${loadedUws.version} (${loadedUws.path})`,
  );
  const missingFlags = missingFromCommandLine();
  if (missingFlags.length > 0) {
    log.warn(
      { event: 'v8_flags_missing', missing: missingFlags },
      `node was started without ${missingFlags.join(' ')}: expect GC pauses of 100 ms and more under steady load (server/v8-flags.ts); start it as the Dockerfile and npm start do`,
    );
  }
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

  const workers = workerCount(config);
  if (!redis && (config.workers ?? 0) > 1) {
    log.warn(
      { event: 'workers_single', workers: config.workers },
      'WORKERS ignored: the memory engine runs one worker (its state lives in one thread); set REDIS_URL or REDIS_CLUSTER_NODES for more',
    );
  }
  if (workers > 1) {
    // The supervisor owns the process from here (signals, exit).
    await runWorkers(config, log, workers, signals, options.routesModule);
  } else {
    await serveAlone();
  }

  /** One server in this process (WORKERS=1, or the memory engine). */
  async function serveAlone(): Promise<void> {
    let server: RunningServer;
    try {
      const routes = options.routesModule ? await loadRouteHook(options.routesModule) : undefined;
      server = await startServer(config, log, undefined, undefined, routes);
    } catch (err) {
      // A start-up failure (store unreachable, port taken, Redis settings refused, native module) is
      // one clear line, not a stack; a service unreached is named with its variable (start-failure.ts).
      const reason = err instanceof Error ? err.message : String(err);
      log.fatal({ event: 'start_failed', err: reason }, `cannot start: ${reason}`);
      process.exit(1);
    }
    log.info(
      { event: 'listening', host: config.host, port: server.port, opsPort: server.opsPort },
      `listening on http://${config.host}:${server.port}${server.opsPort !== undefined ? ` (operations on port ${server.opsPort})` : ''}`,
    );

    let stopping = false;
    const stop = async (signal: string): Promise<void> => {
      if (stopping) return;
      stopping = true;
      const bound = shutdownBoundMs(config.storeTimeoutMs);
      const started = Date.now();
      log.info({ event: 'shutdown', signal }, 'shutting down: refusing new work, answering requests in flight, draining writes');
      const force = setTimeout(() => {
        log.error({ event: 'shutdown_forced', boundMs: bound }, `shutdown took longer than ${bound} ms; exiting`);
        process.exit(1);
      }, bound);
      force.unref();
      await server.close();
      log.info({ event: 'shutdown_done', ms: Date.now() - started }, 'bye');
      process.exit(0);
    };
    signals.handle((signal) => void stop(signal), exitAtOnce(log));
  }
}

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`redpoint: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
