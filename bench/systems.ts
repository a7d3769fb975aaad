import { SERVER_V8_FLAGS } from '../server/v8-flags.js';
import { freePort } from '../test/helpers/processes.js';
import { type RedisServer, startRedisServer } from '../test/helpers/redis-server.js';
import { rawConnector } from './clients/raw-ws.js';
import { redpointConnector } from './clients/redpoint-ws.js';
import { socketIoConnector } from './clients/socketio.js';
import type { ConnectFn } from './clients/types.js';
import { type ChildServer, spawnServer } from './lib/child-server.js';
import { HttpTarget } from './lib/http.js';

export const SYSTEM_IDS = ['uws-raw', 'redis-raw', 'socketio-redis', 'redpoint-memory', 'redpoint-redis'] as const;
export type SystemId = (typeof SYSTEM_IDS)[number];

/** Credentials made up for the bench (production mode, so no dev-mode defaults are involved). */
const API_KEY = 'bench-api-key-0123456789abcdef';
const JWT_SECRET = 'bench-jwt-secret-0123456789abcdef-0123456789';

export interface SystemSpec {
  id: SystemId;
  /** One line for the report. */
  what: string;
  script: string;
  readyPath: string;
  redis: boolean;
  /** Exposes Redpoint's /metrics (group-commit histogram). */
  redpoint: boolean;
  connect: ConnectFn;
}

const redpointEnv = { REDPOINT_API_KEY: API_KEY, REDPOINT_JWT_SECRET: JWT_SECRET, HOST: '127.0.0.1', LOG_LEVEL: 'warn' };

export const SYSTEMS: Record<SystemId, SystemSpec> = {
  'uws-raw': {
    id: 'uws-raw',
    what: 'raw uWebSockets.js: publish a tiny frame per user topic, no state (the floor)',
    script: 'bench/baselines/uws-raw.ts',
    readyPath: '/healthz',
    redis: false,
    redpoint: false,
    connect: rawConnector,
  },
  'redis-raw': {
    id: 'redis-raw',
    what: 'raw uWS + ioredis: HSET/HINCRBY per member in one pipeline, then publish + PUBLISH (store cost)',
    script: 'bench/baselines/redis-raw.ts',
    readyPath: '/healthz',
    redis: true,
    redpoint: false,
    connect: rawConnector,
  },
  'socketio-redis': {
    id: 'socketio-redis',
    what: 'Socket.IO 4.8 + @socket.io/redis-adapter 8.3: a room per user, emit on POST, no state',
    script: 'bench/baselines/socketio-redis.ts',
    readyPath: '/healthz',
    redis: true,
    redpoint: false,
    connect: socketIoConnector,
  },
  'redpoint-memory': {
    id: 'redpoint-memory',
    what: 'Redpoint, memory engine (server/main.ts)',
    script: 'server/main.ts',
    readyPath: '/readyz',
    redis: false,
    redpoint: true,
    connect: redpointConnector(JWT_SECRET, API_KEY),
  },
  'redpoint-redis': {
    id: 'redpoint-redis',
    what: 'Redpoint, Redis engine + Redis bus (server/main.ts with REDIS_URL)',
    script: 'server/main.ts',
    readyPath: '/readyz',
    redis: true,
    redpoint: true,
    connect: redpointConnector(JWT_SECRET, API_KEY),
  },
};

export interface RunningSystem {
  readonly spec: SystemSpec;
  readonly port: number;
  /** The message service's view: keep-alive HTTP with the API key. */
  readonly http: HttpTarget;
  readonly pid: number;
  /** The Redis it uses (its own, or the one it was given), for INFO; none for memory-only systems. */
  readonly redisUrl: string | undefined;
  /** The last lines the server printed. */
  output(): string;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** More environment for the server (e.g. WS_VERSION_EVERY_SECONDS, WORKERS, LOG_LEVEL). */
  env?: Record<string, string>;
  nodeArgs?: readonly string[];
  maxFiles?: number;
  /** Use this Redis instead of a private one (several servers on one store); stop() leaves it running. */
  redisUrl?: string;
  /** A name for error messages, when several servers of one system run. */
  name?: string;
}

function extraServerNodeArgs(): string[] {
  return (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
}

/** Each system gets its own process and, when it needs one, its own private redis-server. */
export async function startSystem(spec: SystemSpec, options: StartOptions = {}): Promise<RunningSystem> {
  let redis: RedisServer | undefined;
  if (spec.redis && options.redisUrl === undefined) redis = await startRedisServer();
  const redisUrl = spec.redis ? (options.redisUrl ?? redis?.url) : undefined;
  let child: ChildServer;
  try {
    const port = await freePort();
    child = await spawnServer({
      name: options.name ?? spec.id,
      script: spec.script,
      port,
      readyPath: spec.readyPath,
      env: { ...(spec.redpoint ? redpointEnv : {}), ...(redisUrl ? { REDIS_URL: redisUrl } : {}), ...options.env },
      // Redpoint runs with the V8 flags its Dockerfile and npm start give it.
      // BENCH_SERVER_NODE_ARGS adds node flags to every Redpoint server (e.g. --trace-gc).
      nodeArgs: [...(spec.redpoint ? [...SERVER_V8_FLAGS, ...extraServerNodeArgs()] : []), ...(options.nodeArgs ?? [])],
      ...(options.maxFiles !== undefined ? { maxFiles: options.maxFiles } : {}),
    });
  } catch (err) {
    await redis?.stop();
    throw err;
  }
  const http = new HttpTarget(child.port, { authorization: `Bearer ${API_KEY}` });
  return {
    spec,
    port: child.port,
    http,
    pid: child.pid,
    redisUrl,
    output: () => child.output(),
    async stop() {
      http.close();
      await child.stop();
      await redis?.stop();
    },
  };
}

export const BENCH_API_KEY = API_KEY;
export const BENCH_JWT_SECRET = JWT_SECRET;
