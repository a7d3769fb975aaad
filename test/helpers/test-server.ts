import { pino } from 'pino';
import { startServer, type RunningServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import type { Config } from '../../server/config.js';
import type { Engine, EngineKind } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

/**
 * A real Redpoint server in this process (uWS on 127.0.0.1, port 0) over either engine, with
 * credentials made up for the test, and fetch helpers that speak its API. Small snapshot and
 * trim settings by default so that short tests already cross snapshot boundaries and trimming.
 */
export interface TestServerOptions {
  engine: EngineKind;
  largeGroupThreshold?: number;
  snapshotEvery?: number;
  streamMaxLen?: number;
  /**
   * Redis engine: use this redis-server (left running on close) instead of starting a private
   * one. Each engine gets its own key prefix, so several servers can share one Redis.
   */
  redis?: RedisServer;
}

export const TEST_API_KEY = 'test-api-key-0123456789abcdef';
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

export interface TestServer {
  readonly kind: EngineKind;
  readonly url: string;
  readonly port: number;
  readonly config: Config;
  readonly server: RunningServer;
  readonly engine: Engine;
  /** The redis-server behind a Redis engine. */
  readonly redis: RedisServer | undefined;
  readonly auth: Authenticator;
  /** A valid JWT for `uid` (cached per user). */
  token(uid: string): Promise<string>;
  request<T = unknown>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  /** Message-service call with the API key. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>>;
  /** Client call with `uid`'s JWT. */
  asUser<T = unknown>(uid: string, method: string, path: string, body?: unknown): Promise<ApiResponse<T>>;
  close(): Promise<void>;
}

export const silentLogger = pino({ level: 'silent' });

let prefixCounter = 0;

export async function startTestServer(options: TestServerOptions): Promise<TestServer> {
  const config: Config = {
    port: 0,
    host: '127.0.0.1',
    redisUrl: undefined,
    apiKey: TEST_API_KEY,
    jwtSecret: TEST_JWT_SECRET,
    devMode: false,
    largeGroupThreshold: options.largeGroupThreshold ?? 3,
    snapshotEvery: options.snapshotEvery ?? 5,
    streamMaxLen: options.streamMaxLen ?? 10,
    logLevel: 'silent',
  };
  const engineOptions = { snapshotEvery: config.snapshotEvery, streamMaxLen: config.streamMaxLen };

  let redis: RedisServer | undefined;
  let ownsRedis = false;
  let engine: Engine;
  if (options.engine === 'memory') {
    engine = new MemoryEngine(engineOptions);
  } else {
    redis = options.redis;
    if (!redis) {
      redis = await startRedisServer();
      ownsRedis = true;
    }
    config.redisUrl = redis.url;
    try {
      engine = await createRedisEngine({ url: redis.url, prefix: `t${process.pid}x${++prefixCounter}`, ...engineOptions });
    } catch (err) {
      if (ownsRedis) await redis.stop();
      throw err;
    }
  }

  let server: RunningServer;
  try {
    server = await startServer(config, silentLogger, engine);
  } catch (err) {
    await engine.close();
    if (ownsRedis) await redis?.stop();
    throw err;
  }
  const url = `http://127.0.0.1:${server.port}`;
  const auth = new Authenticator(config.jwtSecret, config.apiKey);
  const tokens = new Map<string, string>();

  const token = async (uid: string): Promise<string> => {
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

  let closed: Promise<void> | undefined;
  return {
    kind: options.engine,
    url,
    port: server.port,
    config,
    server,
    engine,
    redis,
    auth,
    token,
    request,
    api: (method, path, body) => request(method, path, { auth: 'api', body }),
    asUser: (uid, method, path, body) => request(method, path, { auth: { user: uid }, body }),
    close() {
      closed ??= (async () => {
        await server.close();
        if (ownsRedis) await redis?.stop();
      })();
      return closed;
    },
  };
}
