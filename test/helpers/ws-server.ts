import { startServer, type RunningServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import type { Config, WsOptions } from '../../server/config.js';
import type { Engine, EngineKind } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import type { Cursor, MessageEvent, UnreadSummary } from '../../protocol/types.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { TEST_API_KEY, TEST_JWT_SECRET, silentLogger, type ApiResponse } from './test-server.js';
import { WsClient, type WsClientOptions } from './ws-client.js';

/**
 * A Redpoint server for the WebSocket tests: like `startTestServer` (same credentials, port 0,
 * fetch helpers) plus what those tests need on top — the gateway's `ws` options (hello timeout,
 * rate limits, the test-only push-drop switch...) and several servers over ONE Redis key prefix
 * (several processes of one deployment). Clients opened through `client()` are closed with it.
 */
export interface WsServerOptions {
  engine?: EngineKind;
  largeGroupThreshold?: number;
  snapshotEvery?: number;
  streamMaxLen?: number;
  ws?: Partial<WsOptions>;
  /** Redis engine: this redis-server (left running on close); by default a private one. */
  redis?: RedisServer;
  /** Redis engine: the key prefix; servers given the same one share all state. */
  redisPrefix?: string;
}

export interface WsTestServer {
  readonly kind: EngineKind;
  readonly url: string;
  readonly wsUrl: string;
  readonly port: number;
  readonly config: Config;
  readonly server: RunningServer;
  readonly engine: Engine;
  readonly redis: RedisServer | undefined;
  readonly auth: Authenticator;
  /** A valid JWT for `uid` (cached per user). */
  token(uid: string): Promise<string>;
  /** Message-service call with the API key; throws unless 2xx when `expectOk`. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>>;
  members(conv: string, change: { add?: string[]; remove?: string[]; category?: string }): Promise<{ conv: string; members: number; large: boolean }>;
  post(messages: MessageEvent | MessageEvent[]): Promise<void>;
  /** GET /v1/users/:uid/unread (API key). */
  unread(uid: string): Promise<UnreadSummary>;
  position(uid: string): Promise<Cursor>;
  /** Opens a client for `uid`, sends hello and waits for its first sync (unless `hello: false`). */
  client(uid: string, options?: Omit<WsClientOptions, 'token'> & { token?: string }): Promise<WsClient>;
  close(): Promise<void>;
}

let prefixCounter = 0;

export async function startWsServer(options: WsServerOptions = {}): Promise<WsTestServer> {
  const kind = options.engine ?? 'memory';
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
    ...(options.ws ? { ws: options.ws } : {}),
  };
  const engineOptions = { snapshotEvery: config.snapshotEvery, streamMaxLen: config.streamMaxLen };

  let redis: RedisServer | undefined;
  let ownsRedis = false;
  let engine: Engine;
  if (kind === 'memory') {
    engine = new MemoryEngine(engineOptions);
  } else {
    redis = options.redis;
    if (!redis) {
      redis = await startRedisServer();
      ownsRedis = true;
    }
    // The Redis engine AND the Redis bus: notifications cross processes through Redis.
    config.redisUrl = redis.url;
    const prefix = options.redisPrefix ?? `ws${process.pid}x${++prefixCounter}`;
    try {
      engine = await createRedisEngine({ url: redis.url, prefix, ...engineOptions });
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
  const wsUrl = `ws://127.0.0.1:${server.port}/v1/ws`;
  const auth = new Authenticator(config.jwtSecret, config.apiKey);
  const tokens = new Map<string, string>();
  const clients = new Set<WsClient>();

  const token = async (uid: string): Promise<string> => {
    let t = tokens.get(uid);
    if (!t) {
      t = await auth.mintUserToken(uid);
      tokens.set(uid, t);
    }
    return t;
  };

  const api = async <T>(method: string, path: string, body?: unknown): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { authorization: `Bearer ${config.apiKey}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(url + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    const contentType = res.headers.get('content-type') ?? '';
    let parsed: unknown;
    if (contentType.startsWith('application/json')) parsed = JSON.parse(text);
    return { status: res.status, body: parsed as T, text, contentType };
  };

  const ok = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await api<T>(method, path, body);
    if (res.status !== 200) throw new Error(`${method} ${path} → ${res.status} ${res.text}`);
    return res.body;
  };

  let closed: Promise<void> | undefined;
  return {
    kind,
    url,
    wsUrl,
    port: server.port,
    config,
    server,
    engine,
    redis,
    auth,
    token,
    api,
    members: (conv, change) => ok('PUT', `/v1/conversations/${encodeURIComponent(conv)}/members`, change),
    post: async (messages) => {
      await ok('POST', '/v1/messages', Array.isArray(messages) ? { messages } : messages);
    },
    unread: (uid) => ok('GET', `/v1/users/${encodeURIComponent(uid)}/unread`),
    position: (uid) => server.sync.position(uid),
    async client(uid, clientOptions = {}) {
      const client = await WsClient.open(wsUrl, { ...clientOptions, token: clientOptions.token ?? (await token(uid)) });
      clients.add(client);
      client.closed.then(() => clients.delete(client), () => clients.delete(client));
      if (clientOptions.hello !== false) await client.ready();
      return client;
    },
    close() {
      closed ??= (async () => {
        await Promise.all([...clients].map((c) => c.close()));
        await server.close();
        if (ownsRedis) await redis?.stop();
      })();
      return closed;
    },
  };
}
