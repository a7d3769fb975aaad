import { pino } from 'pino';
import type { Cursor, MessageEvent, UnreadSummary } from '../../protocol/types.js';
import { type RunningServer, startServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import type { Config, DurableConfig, WsOptions } from '../../server/config.js';
import type { ColdSweep } from '../../server/durable/cold-sweep.js';
import { DurableTier } from '../../server/durable/durable-tier.js';
import { Persister } from '../../server/durable/persister.js';
import type { Engine, EngineKind } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import type { RouteHook } from '../../server/gateway/route-hook.js';
import { FrontDoor } from './front-door.js';
import type { RedisCluster } from './redis-cluster.js';
import { type RedisServer, startRedisServer } from './redis-server.js';
import { WsClient, type WsClientOptions } from './ws-client.js';

/**
 * A real Redpoint server in this process (uWS on 127.0.0.1, port 0) over either engine, with
 * credentials made up for the test, fetch helpers that speak its API and WebSocket clients that
 * are closed with it: the one fixture of the HTTP, WebSocket and SDK suites. Small snapshot and
 * trim settings by default so that short tests already cross snapshot boundaries and trimming.
 */
export interface TestServerOptions {
  /** Default: memory. */
  engine?: EngineKind;
  largeGroupThreshold?: number;
  snapshotEvery?: number;
  streamMaxLen?: number;
  /** The gateway's options (hello timeout, rate limits, the test-only push-drop switch...). */
  ws?: Partial<WsOptions>;
  /**
   * Redis engine: use this redis-server (left running on close) instead of starting a private
   * one. Each server gets its own key prefix unless `redisPrefix` is given.
   */
  redis?: RedisServer;
  /**
   * Redis engine on this Redis Cluster (left running on close) instead of one redis-server: the
   * engine and the bus use the cluster (sharded pub/sub), as with REDIS_CLUSTER_NODES.
   */
  redisCluster?: RedisCluster;
  /** Redis engine: the key prefix; servers given the same one share all state (several processes of one deployment). */
  redisPrefix?: string;
  /** Fields of the server config to replace last (e.g. dev mode with the dev credentials). */
  config?: Partial<Config>;
  /**
   * Clients reach the server through a FrontDoor, so that `down()` and `up()` stop it and start
   * it again on the same port over the same engine (a server restart that keeps the state).
   */
  restartable?: boolean;
  /** Extra routes, as an entry point adds them (the dev entry's demo page: client-demo/page-routes.ts). */
  routes?: RouteHook;
  /** Redis engine with the durable tier on this PostgreSQL: restore on touch, and (unless `run: false`) the drainer and the cold sweep. */
  durable?: DurableTestOptions;
}

export interface DurableTestOptions {
  databaseUrl: string;
  /** Default 0: users never go cold. */
  coldAfterSeconds?: number;
  coldSweepSeconds?: number;
  /** Default 50 ms. */
  persistIntervalMs?: number;
  persistBatch?: number;
  /** false: no drainer or sweep runs on its own (the test calls drainOnce/sweepOnce). Default true. */
  run?: boolean;
}

export const TEST_API_KEY = 'test-api-key-0123456789abcdef';
/** The store timeout of the test servers (STORE_TIMEOUT_MS is 2 s by default). */
export const TEST_STORE_TIMEOUT_MS = 15_000;
export const TEST_JWT_SECRET = 'test-jwt-secret-0123456789abcdef-0123456789';

export type AuthMode = 'api' | 'none' | { bearer: string } | { user: string };

export interface RequestOptions {
  auth?: AuthMode;
  /** Serialized as JSON (with content-type application/json) unless `raw` is given. */
  body?: unknown;
  /** Sent as is; set `contentType` yourself. */
  raw?: string | Uint8Array;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface ApiResponse<T = unknown> {
  status: number;
  /** Parsed JSON, or undefined when the reply is not JSON. */
  body: T;
  text: string;
  contentType: string;
}

export interface MembersChange {
  add?: string[];
  remove?: string[];
  category?: string;
}

export interface TestServer {
  readonly kind: EngineKind;
  readonly url: string;
  readonly wsUrl: string;
  readonly port: number;
  readonly config: Config;
  /** The running server; throws while a restartable server is down. */
  readonly server: RunningServer;
  /** False between `down()` and `up()`. */
  readonly running: boolean;
  /** The current engine: after `up({ freshEngine: true })`, the new one. */
  readonly engine: Engine;
  /** The durable tier (`durable` option): its PostgreSQL store, drainer and cold sweep. */
  readonly durable: TestDurable | undefined;
  /** The redis-server behind a Redis engine. */
  readonly redis: RedisServer | undefined;
  readonly auth: Authenticator;
  /** A valid JWT for `uid` (cached per user); with `ttlSeconds`, a fresh one expiring then (negative: already expired). */
  token(uid: string, ttlSeconds?: number): Promise<string>;
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  /** Message-service call with the API key. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>>;
  /** `api` that throws unless the reply is 200 with a JSON body, and returns that body. */
  ok<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
  /** Client call with `uid`'s JWT. */
  asUser<T = unknown>(uid: string, method: string, path: string, body?: unknown): Promise<ApiResponse<T>>;
  /** PUT /v1/conversations/:conv/members (API key, must succeed). */
  members(conv: string, change: MembersChange): Promise<{ conv: string; members: number; large: boolean }>;
  /** POST /v1/messages (API key, must succeed): one message, or several as a batch. */
  post(messages: MessageEvent | MessageEvent[]): Promise<void>;
  /** GET /v1/users/:uid/unread (API key, must succeed). */
  unread(uid: string): Promise<UnreadSummary>;
  position(uid: string): Promise<Cursor>;
  /** Opens a client for `uid`, sends hello and waits for its first sync (unless `hello: false`). */
  client(uid: string, options?: Omit<WsClientOptions, 'token'> & { token?: string }): Promise<WsClient>;
  /** Restartable only: stops the server (clients get 1001 going_away), then the port refuses connections; the state stays in the engine. */
  down(): Promise<void>;
  /**
   * Restartable only: starts the server again, reachable on the port it had. `freshEngine`
   * (memory engine only): over a new, empty engine, as when a server on the memory engine
   * restarts: the state is gone, and a user's next history has a new epoch.
   */
  up(options?: { freshEngine?: boolean }): Promise<void>;
  /** Closes the clients, the server, the engine and a private redis-server. */
  close(): Promise<void>;
}

export const silentLogger = pino({ level: 'silent' });

let prefixCounter = 0;

/**
 * A test server's config: the test credentials, loopback, port 0, small snapshot and trim
 * settings, no logs, and a store timeout long enough that a loaded machine never turns a slow
 * healthy call into outcome_unknown (unless a test is about store timeouts).
 */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return {
    port: 0,
    host: '127.0.0.1',
    storeTimeoutMs: TEST_STORE_TIMEOUT_MS,
    redisUrl: undefined,
    apiKey: TEST_API_KEY,
    jwtSecret: TEST_JWT_SECRET,
    devMode: false,
    largeGroupThreshold: 3,
    snapshotEvery: 5,
    streamMaxLen: 10,
    logLevel: 'silent',
    ...overrides,
  };
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const kind = options.engine ?? 'memory';
  const config = testConfig({
    ...(options.largeGroupThreshold !== undefined ? { largeGroupThreshold: options.largeGroupThreshold } : {}),
    ...(options.snapshotEvery !== undefined ? { snapshotEvery: options.snapshotEvery } : {}),
    ...(options.streamMaxLen !== undefined ? { streamMaxLen: options.streamMaxLen } : {}),
    ...(options.ws ? { ws: options.ws } : {}),
    ...options.config,
  });
  const engineOptions = {
    snapshotEvery: config.snapshotEvery,
    streamMaxLen: config.streamMaxLen,
    storeTimeoutMs: config.storeTimeoutMs ?? TEST_STORE_TIMEOUT_MS,
    badgeMarks: config.badgeHook !== undefined,
  };

  let redis: RedisServer | undefined;
  let ownsRedis = false;
  let engine: Engine;
  const tier = options.durable ? await DurableTier.open(durableConfig(options.durable), silentLogger) : undefined;
  const durableEngine = tier && { durable: { backing: tier.pg, activityEveryMs: tier.activityEveryMs } };
  if (kind === 'memory') {
    engine = new MemoryEngine(engineOptions);
  } else if (options.redisCluster) {
    config.redisClusterNodes = options.redisCluster.addresses;
    const prefix = options.redisPrefix ?? `t${process.pid}x${++prefixCounter}`;
    engine = await createRedisEngine({ cluster: options.redisCluster.addresses, prefix, ...engineOptions, ...durableEngine });
  } else {
    redis = options.redis;
    if (!redis) {
      redis = await startRedisServer();
      ownsRedis = true;
    }
    // The Redis engine AND the Redis bus: notifications cross processes through Redis.
    config.redisUrl = redis.url;
    const prefix = options.redisPrefix ?? `t${process.pid}x${++prefixCounter}`;
    try {
      engine = await createRedisEngine({ url: redis.url, prefix, ...engineOptions, ...durableEngine });
    } catch (err) {
      if (ownsRedis) await redis.stop();
      throw err;
    }
  }

  // A server's close() closes its engine; a restartable one must outlive each server.
  let serverEngine = options.restartable ? keptOpen(engine) : engine;
  let server: RunningServer | null = null;
  const door = options.restartable ? new FrontDoor(() => server?.port ?? 0) : undefined;
  const up = async (): Promise<void> => {
    if (server) throw new Error('the server is already up');
    server = await startServer(config, silentLogger, serverEngine, undefined, options.routes, tier);
    await door?.open();
  };
  const down = async (): Promise<void> => {
    await server?.close();
    server = null;
    await door?.close();
  };
  const restartableOnly = (): void => {
    if (!door) throw new Error('down() and up() need a server started with `restartable: true`');
  };

  try {
    await up();
  } catch (err) {
    await down().catch(() => undefined);
    await engine.close();
    await tier?.close();
    if (ownsRedis) await redis?.stop();
    throw err;
  }
  let durable: TestDurable | undefined;
  if (tier && options.durable) {
    const store = engine.durableStore?.();
    if (!store) throw new Error('the durable tier needs the Redis engine');
    await tier.prepare(store, silentLogger);
    const metrics = (server as RunningServer | null)?.metrics;
    if (!metrics) throw new Error('the server is down');
    if (options.durable.run === false) {
      const config = durableConfig(options.durable);
      const persister = new Persister(
        store,
        tier.pg,
        { intervalMs: config.persistIntervalMs, batch: config.persistBatch, backlogWarn: 1e9 },
        silentLogger,
        metrics,
      );
      durable = { tier, persister, sweep: undefined };
    } else {
      const { persister, sweep } = tier.run(store, silentLogger, metrics);
      durable = { tier, persister, sweep };
    }
  }
  const running = (): RunningServer => {
    if (!server) throw new Error('the server is down');
    return server;
  };
  const port = door ? door.port : running().port;
  const url = `http://127.0.0.1:${port}`;
  const wsUrl = `ws://127.0.0.1:${port}/v1/ws`;
  const auth = Authenticator.fromConfig(config);
  const tokens = new Map<string, string>();
  const clients = new Set<WsClient>();

  const token = async (uid: string, ttlSeconds?: number): Promise<string> => {
    if (ttlSeconds !== undefined) return auth.mintUserToken(uid, ttlSeconds);
    let t = tokens.get(uid);
    if (!t) {
      t = await auth.mintUserToken(uid);
      tokens.set(uid, t);
    }
    return t;
  };

  const request = async <T>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { ...opts.headers };
    const mode = opts.auth ?? 'api';
    if (mode === 'api') headers.authorization = `Bearer ${config.apiKey}`;
    else if (mode !== 'none') headers.authorization = `Bearer ${'bearer' in mode ? mode.bearer : await token(mode.user)}`;
    let body: string | Uint8Array | undefined;
    if (opts.raw !== undefined) {
      body = opts.raw;
      if (opts.contentType !== undefined) headers['content-type'] = opts.contentType;
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? 'application/json';
    }
    const res = await fetch(url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    const contentType = res.headers.get('content-type') ?? '';
    let parsed: unknown;
    if (contentType.startsWith('application/json')) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    return { status: res.status, body: parsed as T, text, contentType };
  };

  const api = <T>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>> => request<T>(method, path, { auth: 'api', body });

  const ok = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await api<T>(method, path, body);
    if (res.status !== 200 || res.body === undefined) throw new Error(`${method} ${path} → ${res.status} ${res.text}`);
    return res.body;
  };

  let closed: Promise<void> | undefined;
  return {
    kind,
    url,
    wsUrl,
    port,
    config,
    get server() {
      return running();
    },
    get running() {
      return server !== null;
    },
    get engine() {
      return engine;
    },
    redis,
    auth,
    token,
    request,
    api,
    ok,
    asUser: (uid, method, path, body) => request(method, path, { auth: { user: uid }, body }),
    members: (conv, change) => ok('PUT', `/v1/conversations/${encodeURIComponent(conv)}/members`, change),
    post: async (messages) => {
      await ok('POST', '/v1/messages', Array.isArray(messages) ? { messages } : messages);
    },
    unread: (uid) => ok('GET', `/v1/users/${encodeURIComponent(uid)}/unread`),
    position: (uid) => running().sync.position(uid),
    async client(uid, clientOptions = {}) {
      const client = await WsClient.open(wsUrl, { ...clientOptions, token: clientOptions.token ?? (await token(uid)) });
      clients.add(client);
      client.closed.then(
        () => clients.delete(client),
        () => clients.delete(client),
      );
      if (clientOptions.hello !== false) await client.ready();
      return client;
    },
    async down() {
      restartableOnly();
      await down();
    },
    async up(upOptions = {}) {
      restartableOnly();
      if (upOptions.freshEngine) {
        if (kind !== 'memory') throw new Error('up({ freshEngine }) restarts a memory engine; a Redis one keeps its state');
        if (server) throw new Error('the server is already up');
        await engine.close();
        engine = new MemoryEngine(engineOptions);
        serverEngine = keptOpen(engine);
      }
      await up();
    },
    get durable() {
      return durable;
    },
    close() {
      closed ??= (async () => {
        await Promise.all([...clients].map((c) => c.close()));
        await tier?.close();
        await down();
        if (door) await engine.close();
        if (ownsRedis) await redis?.stop();
      })();
      return closed;
    },
  };
}

/** The engine with a `close()` that does nothing: the real one is closed by the fixture's `close()`. */
function keptOpen(engine: Engine): Engine {
  return new Proxy(engine, {
    get: (target, prop, receiver) => (prop === 'close' ? async () => undefined : Reflect.get(target, prop, receiver)),
  });
}

export interface TestDurable {
  tier: DurableTier;
  /** Drains on its own unless `run: false`; drainOnce()/drainAll() work either way. */
  persister: Persister;
  sweep: ColdSweep | undefined;
}

function durableConfig(o: DurableTestOptions): DurableConfig {
  return {
    databaseUrl: o.databaseUrl,
    persistIntervalMs: o.persistIntervalMs ?? 50,
    persistBatch: o.persistBatch ?? 2_000,
    backlogWarn: 1_000_000,
    coldAfterSeconds: o.coldAfterSeconds ?? 0,
    coldSweepSeconds: o.coldSweepSeconds ?? 1,
  };
}
