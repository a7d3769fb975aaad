import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { BOTH_TARGETS, parseClusterNodes, type RedisNodeAddress } from './redis-target.js';

export interface WsOptions {
  helloTimeoutMs: number;
  versionEverySeconds: number;
  maxConnectionsPerUser: number;
  framesPerSecond: number;
  framesBurst: number;
  idleTimeoutSeconds: number;
  maxPayloadBytes: number;
  /** Above this, topic publishes skip the socket (it is told to pull once it drains). */
  maxBackpressureBytes: number;
  /** Test-only, never read from the environment: fraction of pushes to drop on purpose. */
  testDropPushRatio?: number;
}

export const defaultWsOptions: WsOptions = {
  helloTimeoutMs: 5000,
  versionEverySeconds: 120,
  maxConnectionsPerUser: 10,
  framesPerSecond: 20,
  framesBurst: 60,
  idleTimeoutSeconds: 60,
  maxPayloadBytes: 64 * 1024,
  maxBackpressureBytes: 1024 * 1024,
};

/** Dev-mode credentials: published on purpose, accepted only on 127.0.0.1. */
export const DEV_API_KEY = 'dev-api-key';
export const DEV_JWT_SECRET = 'redpoint-dev-secret-do-not-use-in-production';

const Env = Type.Object({
  /** TCP port for HTTP and WebSocket. */
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
  /** Interface to bind; dev mode forces 127.0.0.1. */
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  /** redis://[user:pass@]host:port[/db]; unset → the in-memory engine. */
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  /**
   * Redis Cluster seed nodes, `host:port,host:port` (any reachable masters; the client discovers
   * the rest). Mutually exclusive with REDIS_URL. Unset → no cluster.
   */
  REDIS_CLUSTER_NODES: Type.Optional(Type.String({ minLength: 1 })),
  /** Bearer key the message service presents on server-to-server endpoints. */
  REDPOINT_API_KEY: Type.Optional(Type.String({ minLength: 16 })),
  /** HS256 secret of client JWTs (user id in `sub`). */
  REDPOINT_JWT_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  /** Conversations with more members than this use read diffusion. */
  LARGE_GROUP_THRESHOLD: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 500 }),
  /** Fewest entries between two snapshots of a user stream; the interval is twice the user's conversations when that is more. */
  SNAPSHOT_EVERY: Type.Integer({ minimum: 2, maximum: 100_000, default: 16 }),
  /** Most history kept per user stream, in entries, and the largest snapshot interval. */
  STREAM_MAX_LEN: Type.Integer({ minimum: 10, maximum: 10_000_000, default: 2000 }),
  /** Seconds a user's stream (not its records) is kept without changes; 0 keeps it forever. */
  STREAM_IDLE_SECONDS: Type.Integer({ minimum: 0, maximum: 315_360_000, default: 604_800 }),
  /** Seconds between the server's `version` frames to each connection (the safety net). */
  WS_VERSION_EVERY_SECONDS: Type.Integer({ minimum: 1, maximum: 3600, default: 120 }),
  /** A connection must send a valid hello within this many milliseconds. */
  WS_HELLO_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 5000 }),
  /** Connections per user per process; a newer one closes the oldest. */
  WS_MAX_CONNECTIONS_PER_USER: Type.Integer({ minimum: 1, maximum: 1000, default: 10 }),
  /** Sustained client frames per second per connection (burst: 3x). */
  WS_FRAMES_PER_SECOND: Type.Integer({ minimum: 1, maximum: 10_000, default: 20 }),
  /** Seconds without traffic before a connection is dropped (uWS pings automatically before). */
  WS_IDLE_TIMEOUT_SECONDS: Type.Integer({ minimum: 8, maximum: 960, default: 60 }),
  /** Seconds between two runs of the in-server reconcile job (which repairs what it finds); 0: off. */
  RECONCILE_EVERY: Type.Integer({ minimum: 0, maximum: 31_536_000, default: 0 }),
  /** Users and conversations the reconcile job checks per second, so production traffic is not hurt. */
  RECONCILE_RATE: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 200 }),
  /** A message seq more than this above its conversation's head is a jump (counted, logged, refused); 0: no check. */
  MAX_SEQ_JUMP: Type.Integer({ minimum: 0, maximum: 281_474_976_710_656, default: 0 }),
  /** What a jump gets: `refuse` (422 seq_jump, nothing applied) or `warn` (counted and logged, applied). */
  SEQ_JUMP_ACTION: Type.Union([Type.Literal('refuse'), Type.Literal('warn')], { default: 'refuse' }),
  /** pino level. */
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
});

type EnvValues = Static<typeof Env>;
const checkEnv = TypeCompiler.Compile(Env);

export interface Config {
  port: number;
  host: string;
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes (REDIS_CLUSTER_NODES); never set together with `redisUrl`. */
  redisClusterNodes?: readonly RedisNodeAddress[] | undefined;
  apiKey: string;
  jwtSecret: string;
  /** No secrets configured: published dev credentials, loopback only. */
  devMode: boolean;
  largeGroupThreshold: number;
  snapshotEvery: number;
  streamMaxLen: number;
  streamIdleSeconds?: number;
  logLevel: EnvValues['LOG_LEVEL'];
  /** Seconds between reconcile job runs (0 or absent: off). */
  reconcileEverySeconds?: number;
  /** Ids the reconcile job checks per second. */
  reconcileRate?: number;
  /** Seq sanity (0 or absent: off), and what a jump gets. */
  maxSeqJump?: number;
  seqJumpAction?: 'refuse' | 'warn';
  /** WebSocket tuning; anything left out takes the default of `defaultWsOptions`. */
  ws?: Partial<WsOptions>;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const SECRET = new Set(['REDPOINT_API_KEY', 'REDPOINT_JWT_SECRET', 'REDIS_URL']);
const NUMERIC = new Set([
  'PORT',
  'LARGE_GROUP_THRESHOLD',
  'SNAPSHOT_EVERY',
  'STREAM_MAX_LEN',
  'STREAM_IDLE_SECONDS',
  'WS_VERSION_EVERY_SECONDS',
  'WS_HELLO_TIMEOUT_MS',
  'WS_MAX_CONNECTIONS_PER_USER',
  'WS_FRAMES_PER_SECOND',
  'WS_IDLE_TIMEOUT_SECONDS',
  'RECONCILE_EVERY',
  'RECONCILE_RATE',
  'MAX_SEQ_JUMP',
]);

/** Reads and validates the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(Env.properties)) {
    const value = env[key];
    if (value === undefined || value === '') continue;
    raw[key] = NUMERIC.has(key) && /^-?\d+$/.test(value) ? Number(value) : value;
  }
  for (const [key, schema] of Object.entries(Env.properties)) {
    if (raw[key] === undefined && 'default' in schema) raw[key] = schema.default;
  }
  const problems = checkEnv.Check(raw)
    ? []
    : [...checkEnv.Errors(raw)].map((e) => {
        const key = e.path.slice(1);
        // Never echo a secret (or a URL that may hold a password) into logs.
        const shown = SECRET.has(key) ? '(value hidden)' : `(got ${JSON.stringify(e.value)})`;
        return `${key}: ${e.message} ${shown}`;
      });
  // The schema only says it is a string; its entries are checked here, in the same report.
  let redisClusterNodes: RedisNodeAddress[] | undefined;
  if (typeof raw.REDIS_CLUSTER_NODES === 'string') {
    try {
      redisClusterNodes = parseClusterNodes(raw.REDIS_CLUSTER_NODES);
    } catch (err) {
      problems.push(`REDIS_CLUSTER_NODES: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  const values = raw as EnvValues;
  if (redisClusterNodes && values.REDIS_URL !== undefined) throw new ConfigError(BOTH_TARGETS);
  const hasKey = values.REDPOINT_API_KEY !== undefined;
  const hasSecret = values.REDPOINT_JWT_SECRET !== undefined;
  if (hasKey !== hasSecret) {
    throw new ConfigError('set both REDPOINT_API_KEY and REDPOINT_JWT_SECRET (production) or neither (dev mode)');
  }
  const devMode = !hasKey;
  return {
    port: values.PORT,
    host: devMode ? '127.0.0.1' : values.HOST,
    redisUrl: values.REDIS_URL,
    redisClusterNodes,
    apiKey: values.REDPOINT_API_KEY ?? DEV_API_KEY,
    jwtSecret: values.REDPOINT_JWT_SECRET ?? DEV_JWT_SECRET,
    devMode,
    largeGroupThreshold: values.LARGE_GROUP_THRESHOLD,
    snapshotEvery: values.SNAPSHOT_EVERY,
    streamMaxLen: values.STREAM_MAX_LEN,
    streamIdleSeconds: values.STREAM_IDLE_SECONDS,
    logLevel: values.LOG_LEVEL,
    reconcileEverySeconds: values.RECONCILE_EVERY,
    reconcileRate: values.RECONCILE_RATE,
    maxSeqJump: values.MAX_SEQ_JUMP,
    seqJumpAction: values.SEQ_JUMP_ACTION,
    ws: {
      versionEverySeconds: values.WS_VERSION_EVERY_SECONDS,
      helloTimeoutMs: values.WS_HELLO_TIMEOUT_MS,
      maxConnectionsPerUser: values.WS_MAX_CONNECTIONS_PER_USER,
      framesPerSecond: values.WS_FRAMES_PER_SECOND,
      framesBurst: values.WS_FRAMES_PER_SECOND * 3,
      idleTimeoutSeconds: values.WS_IDLE_TIMEOUT_SECONDS,
    },
  };
}
