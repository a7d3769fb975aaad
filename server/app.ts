import type { Logger } from 'pino';
import { ReconcileJob } from './admin/reconcile-job.js';
import { LocalToolbox } from './admin/toolbox.js';
import { Authenticator } from './auth/tokens.js';
import { type Config, DEFAULT_MAX_CONVERSATIONS_PER_USER, DEV_API_KEY, defaultWsOptions } from './config.js';
import type { ColdSweep } from './durable/cold-sweep.js';
import { DbReconciler } from './durable/db-reconcile.js';
import { DurableTier } from './durable/durable-tier.js';
import type { Persister } from './durable/persister.js';
import { RestoreLog } from './durable/restore-log.js';
import { adminOf } from './engine/admin.js';
import { createEngine } from './engine/create-engine.js';
import type { Engine } from './engine/engine.js';
import { StoreHealth } from './engine/store-health.js';
import { registerAdminRoutes } from './gateway/admin-routes.js';
import { registerApiRoutes } from './gateway/api-routes.js';
import { enableCors } from './gateway/cors.js';
import { registerDevTokenRoute } from './gateway/dev-token-route.js';
import { HttpRouter, type Method, type RouterOptions } from './gateway/http.js';
import { listenExclusive, listenShared } from './gateway/listen.js';
import { registerOpenApiRoute } from './gateway/openapi-route.js';
import { registerOpsRoutes } from './gateway/ops-routes.js';
import type { RouteHook } from './gateway/route-hook.js';
import { defaultUserBudgetOptions, UserBudgets } from './gateway/user-budget.js';
import { closeApp, type us_listen_socket, uws } from './gateway/uws.js';
import { WsGateway } from './gateway/ws-gateway.js';
import { SocketPresence } from './hook/presence.js';
import { type RunningHook, startBadgeHook } from './hook/start-hook.js';
import { Metrics } from './metrics/metrics.js';
import { VERSION } from './ops/build-info.js';
import { type OpsListener, startOpsListener } from './ops/ops-listener.js';
import { type RunningQueues, startQueues } from './queue/start-queue.js';
import { DEFAULT_STORE_TIMEOUT_MS, redisTargetOf } from './redis-target.js';
import { addressOfUrl } from './start-failure.js';
import { ConversationCap } from './sync/conversation-cap.js';
import { DEFAULT_MAX_READ_AHEAD, ReadCap } from './sync/read-cap.js';
import { DEFAULT_RECEIPTS_OPTIONS } from './sync/receipts.js';
import { DEFAULT_MAX_SEQ_JUMP, SeqGuard } from './sync/seq-guard.js';
import { SyncService } from './sync/sync-service.js';

/** The durable tier of a running server; the drainer and sweep run in the first worker only. */
interface DurableRuntime {
  tier: DurableTier;
  persister: Persister | undefined;
  sweep: ColdSweep | undefined;
}

export interface RunningServer {
  readonly port: number;
  /** The operations listener's port (OPS_PORT), or undefined when they are served on `port`. */
  readonly opsPort: number | undefined;
  readonly engine: Engine;
  readonly sync: SyncService;
  readonly metrics: Metrics;
  readonly gateway: WsGateway;
  /** The HTTP routes it serves (method, pattern), CORS preflights included. */
  readonly routes: ReadonlyArray<{ method: Method; pattern: string }>;
  /** The periodic reconcile (RECONCILE_EVERY), when on. */
  readonly reconcileJob: ReconcileJob | undefined;
  /** PostgreSQL behind Redis (DATABASE_URL), when on; its drainer runs in the first worker. */
  readonly durable: DurableRuntime | undefined;
  /** The queue ingest (INGEST_OUTBOX_URL, INGEST_NATS_URL), when configured. */
  readonly queues: RunningQueues | undefined;
  /** Stop accepting, answer everything in flight, let in-flight writes finish, close the store. Idempotent. */
  close(): Promise<void>;
}

/** Over the store timeout, the time a request may take to be answered (the router's bound). */
const REQUEST_GRACE_MS = 250;

/** Shutting down, the connections close once no request arrived for this long (at most MAX_LINGER_MS). */
const QUIET_MS = 250;
const MAX_LINGER_MS = 1_000;

/** How long shutdown may take before main.ts gives up on it: every step is bounded by the store timeout. */
export function shutdownBoundMs(storeTimeoutMs = DEFAULT_STORE_TIMEOUT_MS): number {
  return Math.max(10_000, 4 * storeTimeoutMs + 2_000 + MAX_LINGER_MS);
}

/** One of several server threads serving one port (WORKERS; server/workers/). */
export interface WorkerRole {
  index: number;
  count: number;
  /** /metrics of every worker, aggregated by the supervisor. */
  exposition(): Promise<string>;
}

/**
 * Builds and starts one Redpoint server: engine, sync service, HTTP routes. As one `worker` of
 * several, it shares the port; the first worker alone runs the ops listener, the reconcile job
 * and the process metrics. `routes` adds an entry point's own routes (the dev entry's demo page).
 */
export async function startServer(
  config: Config,
  log: Logger,
  engine?: Engine,
  worker?: WorkerRole,
  routes?: RouteHook,
  /** A durable tier the caller opened for `engine` and runs itself (tests): erase, readiness and reconcile use it. */
  attachedTier?: DurableTier,
): Promise<RunningServer> {
  const storeTimeoutMs = config.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  const first = (worker?.index ?? 0) === 0;
  const metrics = new Metrics({ processMetrics: first });
  if (worker) metrics.exposition = () => worker.exposition();
  metrics.buildInfo.set({ version: VERSION, node: process.version }, 1);
  const health = new StoreHealth(log, metrics, storeTimeoutMs);
  const routerOptions: RouterOptions = {
    // A write acknowledged only once replicas have it may take a WAIT on top of its store call.
    requestTimeoutMs: storeTimeoutMs + (config.redisWaitReplicas ? (config.redisWaitTimeoutMs ?? 0) : 0) + REQUEST_GRACE_MS,
    storeTroubledSince: (since) => health.troubledSince(since),
  };
  // One Redis, a Redis Cluster or Sentinels (never two: that throws here, before anything starts).
  redisTargetOf(config);
  // The durable tier first: the engine restores from it from its first request on.
  const ownTier = config.durable && !engine ? await DurableTier.open(config.durable, log) : undefined;
  const tier = ownTier ?? attachedTier;
  const restoreLog =
    ownTier && config.durable && new RestoreLog(log, metrics.registry, { source: `PostgreSQL at ${addressOfUrl(config.durable.databaseUrl, 5432)}` });
  const store =
    engine ??
    (await createEngine({
      redisUrl: config.redisUrl,
      redisClusterNodes: config.redisClusterNodes,
      redisSentinels: config.redisSentinels,
      redisSentinelMaster: config.redisSentinelMaster,
      redisAccess: config.redisAccess,
      redisWaitReplicas: config.redisWaitReplicas,
      redisWaitTimeoutMs: config.redisWaitTimeoutMs,
      snapshotEvery: config.snapshotEvery,
      streamMaxLen: config.streamMaxLen,
      ...(config.streamIdleSeconds !== undefined ? { streamIdleSeconds: config.streamIdleSeconds } : {}),
      badgeMarks: config.badgeHook !== undefined,
      storeTimeoutMs,
      health,
      allowEviction: config.redisAllowEviction,
      log,
      durable: ownTier && {
        backing: ownTier.pg,
        activityEveryMs: ownTier.activityEveryMs,
        onRestore: (kind, n) => {
          metrics.restored.inc({ kind }, n);
          restoreLog?.add(kind, n);
        },
      },
    }).catch(async (err: unknown) => {
      await ownTier?.close();
      throw err;
    }));
  const readCap = new ReadCap(store, config.maxReadAhead ?? DEFAULT_MAX_READ_AHEAD, (capped) => {
    metrics.readsCapped.inc();
    log.warn(
      capped,
      `read of seq ${capped.seq} in conversation ${capped.conv} is above its head ${capped.head} by more than MAX_READ_AHEAD: applied as ${capped.applied}`,
    );
  });
  const maxConversations = config.maxConversationsPerUser ?? DEFAULT_MAX_CONVERSATIONS_PER_USER;
  const sync = new SyncService(store, {
    largeGroupThreshold: config.largeGroupThreshold,
    readCap,
    receipts: { ...DEFAULT_RECEIPTS_OPTIONS, ...config.receipts },
    receiptsOnSend: config.receipts?.onSend ?? false,
    badgeMarks: config.badgeHook !== undefined,
    ...(maxConversations > 0 ? { conversationCap: new ConversationCap(store, maxConversations) } : {}),
  });
  sync.ingest.onFlush = (stats) => {
    metrics.groupCommitBatch.observe(stats.messages);
    metrics.groupCommitOps.observe(stats.userOps);
    // One store call when the engine did the flush in one step; else the heads, then the user ops.
    if (stats.oneStep) metrics.storeLatency.observe({ op: 'record_and_apply' }, stats.recordSeconds);
    else {
      metrics.storeLatency.observe({ op: 'record_message' }, stats.recordSeconds);
      if (stats.userOps > 0) metrics.storeLatency.observe({ op: 'apply_user_ops' }, stats.applySeconds);
    }
  };
  sync.onStoreCall = (op, seconds) => metrics.storeLatency.observe({ op }, seconds);
  sync.onFollowDropped = () => metrics.threadFollowsDropped.inc();
  sync.receipts.onError = (err) =>
    log.warn({ err: err instanceof Error ? err.message : String(err) }, 'read receipts: a step after a read failed (the next read repairs it)');
  const auth = Authenticator.fromConfig(config, (err) => log.warn({ err: err.message }, 'cannot load the JWK Set of user tokens'));
  const app = uws.App();
  const router = new HttpRouter(app, metrics, log, routerOptions);
  // One budget per user for their sockets and their HTTP requests alike.
  const budgets = new UserBudgets({ ...defaultUserBudgetOptions, ...config.userBudget });
  const gateway = new WsGateway(app, sync, auth, metrics, log, { ...defaultWsOptions, ...config.ws }, budgets, (res, req) =>
    router.refusedFraming(res, req, '/v1/ws'),
  );
  const seqGuard = new SeqGuard(store, { maxJump: config.maxSeqJump ?? DEFAULT_MAX_SEQ_JUMP, action: config.seqJumpAction ?? 'refuse' }, (jump) => {
    metrics.seqJumps.inc({ action: jump.refused ? 'refused' : 'warned' });
    log.warn(jump, `seq ${jump.seq} of conversation ${jump.conv} jumps ${jump.seq - jump.head} above its head ${jump.head}${jump.refused ? ': refused' : ''}`);
  });
  const admin = adminOf(store);
  const toolbox = new LocalToolbox(store, admin, { ...config, largeGroupThreshold: config.largeGroupThreshold, durableErase: tier?.pg });
  const apiPaths = registerApiRoutes(router, { sync, auth, metrics, seqGuard, budgets });
  const adminPaths = registerAdminRoutes(router, { toolbox, auth, metrics, seqGuard, log });
  // With OPS_PORT the operations endpoints live only there; the main port answers them 404.
  const database = tier ? () => tier.databaseReady() : undefined;
  const readable = first ? store.durableStore?.() : undefined;
  metrics.readDurable(tier && readable ? tier.readings(readable) : undefined);
  const opsPaths = config.opsPort === undefined ? registerOpsRoutes(router, { engine: store, metrics, database }) : [];
  const docPaths = registerOpenApiRoute(router, config.devMode);
  // Token minting exists only with the published dev credentials (loopback).
  const devPaths = config.devMode ? registerDevTokenRoute(router, auth) : [];
  const hookPaths = routes ? routes(router, { auth, apiKey: config.apiKey ?? DEV_API_KEY, devMode: config.devMode, log }) : [];
  if (config.corsOrigins) enableCors(router, config.corsOrigins, [...apiPaths, ...adminPaths, ...docPaths]);
  router.fallback([...apiPaths, ...adminPaths, ...opsPaths, ...docPaths, ...devPaths, ...hookPaths]);
  const reconcileStore = store.durableStore?.();
  const reconcileJob =
    first && (config.reconcileEverySeconds ?? 0) > 0
      ? new ReconcileJob(store, admin, metrics, log, {
          everySeconds: config.reconcileEverySeconds ?? 0,
          rate: config.reconcileRate ?? 200,
          threshold: config.largeGroupThreshold,
          ...(tier && reconcileStore
            ? { againstDb: (graceMs: number) => new DbReconciler(tier.pg, reconcileStore, store, admin, { repair: true, graceMs }) }
            : {}),
        })
      : undefined;

  const durableStore = ownTier && first ? store.durableStore?.() : undefined;
  let listenSocket: us_listen_socket;
  let ops: OpsListener | undefined;
  let queues: RunningQueues | undefined;
  let hook: RunningHook | undefined;
  // The socket-less rule's presence: every worker tells the store whose sockets it holds.
  const presence = config.badgeHook?.socketlessOnly ? new SocketPresence(store.badgeMarks(), gateway, log) : undefined;
  presence?.start();
  try {
    // Records go through the same ingest (and group commit) as POST /v1/messages. One worker
    // consumes: the sources are shared by processes anyway, and its batches already merge.
    if (first && config.queue) {
      queues = await startQueues(config.queue, { sync, seqGuard, onMessages: (n) => metrics.ingestMessageCounts.add('', n) }, metrics.registry, log);
    }
    // The badge hook's drainer (one per process, first worker: the marks are shared by every process).
    if (first && config.badgeHook) hook = await startBadgeHook(config.badgeHook, store, sync, metrics.registry, log);
    // Before serving, and before the port is taken: a failure here leaves nothing listening.
    if (ownTier && durableStore) await ownTier.prepare(durableStore, log);
    listenSocket = await (worker ? listenShared : listenExclusive)(app, config.host, config.port);
    if (config.opsPort !== undefined && first) {
      ops = await startOpsListener(config.host, config.opsPort, { engine: store, metrics, log, router: routerOptions, database }).catch((err: unknown) => {
        uws.us_listen_socket_close(listenSocket);
        throw err;
      });
    }
  } catch (err) {
    // Nothing was served yet: release the store connections this call opened.
    await queues?.close();
    await hook?.close();
    presence?.stop();
    health.close();
    gateway.shutdown();
    if (!engine) await store.close();
    await ownTier?.close();
    closeApp(app);
    throw err;
  }
  const port = uws.us_socket_local_port(listenSocket);
  metrics.ready.set(1);
  reconcileJob?.start();
  const durable =
    ownTier && (durableStore ? { tier: ownTier, ...ownTier.run(durableStore, log, metrics) } : { tier: ownTier, persister: undefined, sweep: undefined });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      // Connections close on purpose from here: not an outage to report.
      health.close();
      metrics.ready.set(0);
      router.refuseNew();
      ops?.router.refuseNew();
      uws.us_listen_socket_close(listenSocket);
      ops?.stopListening();
      gateway.shutdown();
      await reconcileJob?.stop();
      // Every request in flight is answered (each is bounded by the router's deadline; drain
      // answers any left after it). Flushes in flight get a store timeout to finish: their
      // requests are answered either way (200 once applied, or 503 with the outcome stated).
      const answered = routerOptions.requestTimeoutMs + REQUEST_GRACE_MS;
      // The queue batch in hand is finished (settled) or released before the store closes.
      await Promise.all([router.drain(answered), ops?.router.drain(answered), queues ? within(queues.close(), storeTimeoutMs + REQUEST_GRACE_MS) : undefined]);
      await within(sync.idle(), storeTimeoutMs);
      // Deliveries in flight end (or their claims expire for another process to take).
      if (hook) await within(hook.close(), storeTimeoutMs);
      presence?.stop();
      // The drainer's pass in flight finishes (its marks are cleared or stay in Redis for the next process).
      await ownTier?.close();
      await store.close();
      restoreLog?.flush();
      // Clients still sending on keep-alive connections get their 503 (and a close) first.
      await Promise.all([router.quiet(QUIET_MS, MAX_LINGER_MS), ops?.router.quiet(QUIET_MS, MAX_LINGER_MS)]);
      // What a client whose request fails from here on can rely on: 0 unanswered means it was never read.
      log.info({ event: 'http_connections_closing', unanswered: router.unanswered + (ops?.router.unanswered ?? 0) }, 'closing HTTP connections');
      closeApp(app);
      ops?.close();
    })();
    return closing;
  };
  return { port, opsPort: ops?.port, engine: store, sync, metrics, gateway, routes: router.routes, reconcileJob, durable, queues, close };
}

/** Waits for `work`, but no longer than `ms` (it goes on; its outcome no longer matters here). */
async function within(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
