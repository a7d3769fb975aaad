import type { Logger } from 'pino';
import { Authenticator } from './auth/tokens.js';
import { defaultWsOptions, type Config } from './config.js';
import type { Engine } from './engine/engine.js';
import { createEngine } from './engine/create-engine.js';
import { ReconcileJob } from './admin/reconcile-job.js';
import { LocalToolbox } from './admin/toolbox.js';
import { adminOf } from './engine/admin.js';
import { registerAdminRoutes } from './gateway/admin-routes.js';
import { registerApiRoutes } from './gateway/api-routes.js';
import { registerDemoRoutes } from './gateway/demo-routes.js';
import { HttpRouter } from './gateway/http.js';
import { registerOpsRoutes } from './gateway/ops-routes.js';
import { closeApp, uws, type us_listen_socket } from './gateway/uws.js';
import { Metrics } from './metrics/metrics.js';
import { redisTargetOf } from './redis-target.js';
import { WsGateway } from './gateway/ws-gateway.js';
import { SeqGuard } from './sync/seq-guard.js';
import { SyncService } from './sync/sync-service.js';

export interface RunningServer {
  readonly port: number;
  readonly engine: Engine;
  readonly sync: SyncService;
  readonly metrics: Metrics;
  readonly gateway: WsGateway;
  /** The periodic reconcile (RECONCILE_EVERY), when on. */
  readonly reconcileJob: ReconcileJob | undefined;
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
  const auth = new Authenticator(config.jwtSecret, config.apiKey);
  const app = uws.App();
  const router = new HttpRouter(app, metrics, log);
  const gateway = new WsGateway(app, sync, auth, metrics, log, { ...defaultWsOptions, ...config.ws });
  const seqGuard = new SeqGuard(store, { maxJump: config.maxSeqJump ?? 0, action: config.seqJumpAction ?? 'refuse' }, (jump) => {
    metrics.seqJumps.inc({ action: jump.refused ? 'refused' : 'warned' });
    log.warn(jump, `seq ${jump.seq} of conversation ${jump.conv} jumps ${jump.seq - jump.head} above its head ${jump.head}${jump.refused ? ': refused' : ''}`);
  });
  const admin = adminOf(store);
  const toolbox = new LocalToolbox(store, admin, { ...config, largeGroupThreshold: config.largeGroupThreshold });
  const apiPaths = registerApiRoutes(router, { sync, auth, metrics, seqGuard });
  const adminPaths = registerAdminRoutes(router, { toolbox, auth, seqGuard });
  const opsPaths = registerOpsRoutes(router, { engine: store, metrics });
  // The demo page and its token minting exist only with the published dev credentials (loopback).
  const demoPaths = config.devMode ? registerDemoRoutes(router, { auth, apiKey: config.apiKey, log }) : [];
  router.fallback([...apiPaths, ...adminPaths, ...opsPaths, ...demoPaths]);
  const reconcileJob =
    (config.reconcileEverySeconds ?? 0) > 0
      ? new ReconcileJob(store, admin, metrics, log, { everySeconds: config.reconcileEverySeconds ?? 0, rate: config.reconcileRate ?? 200, threshold: config.largeGroupThreshold })
      : undefined;

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
  reconcileJob?.start();

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      metrics.ready.set(0);
      router.refuseNew();
      uws.us_listen_socket_close(listenSocket);
      gateway.shutdown();
      await reconcileJob?.stop();
      await sync.idle();
      await store.close();
      closeApp(app);
    })();
    return closing;
  };
  return { port, engine: store, sync, metrics, gateway, reconcileJob, close };
}
