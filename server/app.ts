import type { Logger } from 'pino';
import { Authenticator } from './auth/tokens.js';
import { DEV_API_KEY, defaultWsOptions, type Config } from './config.js';
import type { Engine } from './engine/engine.js';
import { createEngine } from './engine/create-engine.js';
import { registerApiRoutes } from './gateway/api-routes.js';
import { enableCors } from './gateway/cors.js';
import { registerDemoRoutes } from './gateway/demo-routes.js';
import { HttpRouter, type Method } from './gateway/http.js';
import { registerOpenApiRoute } from './gateway/openapi-route.js';
import { registerOpsRoutes } from './gateway/ops-routes.js';
import { closeApp, uws, type us_listen_socket } from './gateway/uws.js';
import { Metrics } from './metrics/metrics.js';
import { redisTargetOf } from './redis-target.js';
import { WsGateway } from './gateway/ws-gateway.js';
import { SyncService } from './sync/sync-service.js';

export interface RunningServer {
  readonly port: number;
  readonly engine: Engine;
  readonly sync: SyncService;
  readonly metrics: Metrics;
  readonly gateway: WsGateway;
  /** The HTTP routes it serves (method, pattern), CORS preflights included. */
  readonly routes: ReadonlyArray<{ method: Method; pattern: string }>;
  /** Stop accepting, let in-flight work finish, close the store. Idempotent. */
  close(): Promise<void>;
}

/** Builds and starts one Redpoint process: engine, sync service, HTTP routes. */
export async function startServer(config: Config, log: Logger, engine?: Engine): Promise<RunningServer> {
  // One Redis or a Redis Cluster (never both: that throws here, before anything starts).
  redisTargetOf(config);
  const store =
    engine ??
    (await createEngine({
      redisUrl: config.redisUrl,
      redisClusterNodes: config.redisClusterNodes,
      snapshotEvery: config.snapshotEvery,
      streamMaxLen: config.streamMaxLen,
      ...(config.streamIdleSeconds !== undefined ? { streamIdleSeconds: config.streamIdleSeconds } : {}),
    }));
  const metrics = new Metrics();
  const sync = new SyncService(store, { largeGroupThreshold: config.largeGroupThreshold });
  sync.ingest.onFlush = (stats) => {
    metrics.groupCommitBatch.observe(stats.messages);
    metrics.groupCommitOps.observe(stats.userOps);
    metrics.storeLatency.observe({ op: 'record_message' }, stats.recordSeconds);
    if (stats.userOps > 0) metrics.storeLatency.observe({ op: 'apply_user_ops' }, stats.applySeconds);
  };
  sync.onStoreCall = (op, seconds) => metrics.storeLatency.observe({ op }, seconds);
  const auth = Authenticator.fromConfig(config, (err) => log.warn({ err: err.message }, 'cannot load the JWK Set of user tokens'));
  const app = uws.App();
  const router = new HttpRouter(app, metrics, log);
  const gateway = new WsGateway(app, sync, auth, metrics, log, { ...defaultWsOptions, ...config.ws });
  const apiPaths = registerApiRoutes(router, { sync, auth, metrics });
  const opsPaths = registerOpsRoutes(router, { engine: store, metrics });
  const docPaths = registerOpenApiRoute(router);
  // The demo page and its token minting exist only with the published dev credentials (loopback).
  const demoPaths = config.devMode ? registerDemoRoutes(router, { auth, apiKey: config.apiKey ?? DEV_API_KEY, log }) : [];
  if (config.corsOrigins) enableCors(router, config.corsOrigins, [...apiPaths, ...docPaths]);
  router.fallback([...apiPaths, ...opsPaths, ...docPaths, ...demoPaths]);

  let listenSocket: us_listen_socket;
  try {
    listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
      app.listen(config.host, config.port, (socket) => {
        if (socket) resolve(socket);
        else reject(new Error(`cannot listen on ${config.host}:${config.port} (port in use?)`));
      });
    });
  } catch (err) {
    // Nothing was served yet: release the store connections this call opened.
    gateway.shutdown();
    if (!engine) await store.close();
    closeApp(app);
    throw err;
  }
  const port = uws.us_socket_local_port(listenSocket);
  metrics.ready.set(1);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      metrics.ready.set(0);
      router.refuseNew();
      uws.us_listen_socket_close(listenSocket);
      gateway.shutdown();
      await sync.idle();
      await store.close();
      closeApp(app);
    })();
    return closing;
  };
  return { port, engine: store, sync, metrics, gateway, routes: router.routes, close };
}
