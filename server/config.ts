import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { type Static, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { type CredentialEnv, DEV_API_KEY, DEV_JWT_SECRET, resolveCredentials } from './auth/auth-config.js';
import type { AuthSettings } from './auth/tokens.js';
import { DEFAULT_CLOCK_TOLERANCE_SECONDS, DEFAULT_MAX_TTL_SECONDS } from './auth/user-tokens.js';
import { type CorsOrigins, parseCorsOrigins } from './cors-config.js';
import { defaultUserBudgetOptions, type UserBudgetOptions } from './gateway/user-budget.js';
import { OUTBOX_TABLE_PATTERN } from './queue/outbox-sql.js';
import { DEFAULT_QUEUE_BATCH, DEFAULT_RETRY_SECONDS, type QueueConfig } from './queue/start-queue.js';
import {
  BOTH_TARGETS,
  DEFAULT_STORE_TIMEOUT_MS,
  describeRedisTarget,
  parseClusterNodes,
  type RedisAccess,
  type RedisNodeAddress,
  redisTargetOf,
} from './redis-target.js';
import { DEFAULT_MAX_READ_AHEAD } from './sync/read-cap.js';
import type { ReceiptsOptions } from './sync/receipts.js';
import { DEFAULT_MAX_SEQ_JUMP } from './sync/seq-guard.js';

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

/** MAX_CONVERSATIONS_PER_USER's default (the bench's heavy-user section, docs/security.md). */
export const DEFAULT_MAX_CONVERSATIONS_PER_USER = 10_000;

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

export { DEV_API_KEY, DEV_JWT_SECRET } from './auth/auth-config.js';

const Env = Type.Object({
  /** TCP port for HTTP and WebSocket. */
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
  /** Interface to bind; dev mode forces 127.0.0.1. */
  HOST: Type.String({ minLength: 1, default: '0.0.0.0' }),
  /** Separate port for /metrics, /healthz, /readyz (same HOST); unset → they are on PORT. */
  OPS_PORT: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
  /**
   * Bound of one store call: it fails after this long without any reply from its Redis. While
   * the store is in trouble every request that needs it is answered within about this. No less
   * than half a second: one script (a big user's snapshot) must fit in it.
   */
  STORE_TIMEOUT_MS: Type.Integer({ minimum: 500, maximum: 60_000, default: DEFAULT_STORE_TIMEOUT_MS }),
  /** Start even though Redis may evict keys (maxmemory-policy other than noeviction). */
  REDIS_ALLOW_EVICTION: Type.Union(
    ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
    { default: 'false' },
  ),
  /** redis://[user:pass@]host:port[/db]; unset → the in-memory engine. */
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  /**
   * Redis Cluster seed nodes, `host:port,host:port` (any reachable masters; the client discovers
   * the rest). Mutually exclusive with REDIS_URL. Unset → no cluster.
   */
  REDIS_CLUSTER_NODES: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * Sentinels of the master to use, `host:port,host:port`: Redpoint asks them for the master and
   * follows it across failovers (docs/failover.md). Mutually exclusive with REDIS_URL and
   * REDIS_CLUSTER_NODES.
   */
  REDIS_SENTINELS: Type.Optional(Type.String({ minLength: 1 })),
  /** The master's name in the Sentinels' configuration (`sentinel monitor <name> ...`). */
  REDIS_SENTINEL_MASTER: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._-]{1,128}$' })),
  /** ACL user of the data nodes (Sentinel's master and replicas, or the cluster nodes); REDIS_URL carries its own. */
  REDIS_USERNAME: Type.Optional(Type.String({ minLength: 1 })),
  /** Password of the data nodes (`requirepass`, or the ACL user's); REDIS_URL carries its own. */
  REDIS_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  /** The Sentinels' own ACL user and password, when they require one. */
  REDIS_SENTINEL_USERNAME: Type.Optional(Type.String({ minLength: 1 })),
  REDIS_SENTINEL_PASSWORD: Type.Optional(Type.String({ minLength: 1 })),
  /** TLS to the data nodes and the Sentinels (REDIS_URL says it with `rediss://`). */
  REDIS_TLS: Type.Union(
    ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
    { default: 'false' },
  ),
  /** PEM file of the certificates to trust for Redis TLS instead of the system's (also for a `rediss://` REDIS_URL). */
  REDIS_TLS_CA_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * A write is acknowledged only once this many replicas have it (`WAIT` on the connection that
   * wrote, its reply checked); a shortfall answers 503 outcome_unknown. 0: acknowledged once the
   * master has it (a failover may lose it).
   */
  REDIS_WAIT_REPLICAS: Type.Integer({ minimum: 0, maximum: 64, default: 0 }),
  /** How long a write waits for REDIS_WAIT_REPLICAS replicas; below STORE_TIMEOUT_MS (the WAIT holds its connection). */
  REDIS_WAIT_TIMEOUT_MS: Type.Integer({ minimum: 10, maximum: 59_000, default: 1_000 }),
  /** Bearer key the message service presents on server-to-server endpoints. */
  REDPOINT_API_KEY: Type.Optional(Type.String({ minLength: 16 })),
  /** More API keys, `name:key,name:key`; the name shows in logs (rotate one without downtime). */
  REDPOINT_API_KEYS: Type.Optional(Type.String({ minLength: 1 })),
  /** HS256 secret of client JWTs (user id in `sub`). */
  REDPOINT_JWT_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  /** JWK Set of the public keys (ES256/RS256) of client JWTs, by URL... */
  REDPOINT_JWKS_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** ...or by file. */
  REDPOINT_JWKS_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /** Required `iss` of client JWTs. */
  REDPOINT_JWT_ISSUER: Type.Optional(Type.String({ minLength: 1 })),
  /** Required `aud` of client JWTs. */
  REDPOINT_JWT_AUDIENCE: Type.Optional(Type.String({ minLength: 1 })),
  /** Client JWTs valid for longer than this (exp − iat) are refused. */
  REDPOINT_JWT_MAX_TTL_SECONDS: Type.Integer({ minimum: 60, maximum: 366 * 24 * 3600, default: DEFAULT_MAX_TTL_SECONDS }),
  /** Clock difference allowed on a client JWT's `exp`, `nbf` and `iat` (an identity provider's clock a little ahead). */
  REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS: Type.Integer({ minimum: 0, maximum: 300, default: DEFAULT_CLOCK_TOLERANCE_SECONDS }),
  /** Origins whose browser pages may call the HTTP API: exact origins, comma-separated, or `*`. */
  CORS_ORIGINS: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * Conversations with more members than this use read diffusion. 100 from the measured costs
   * (bench/reports/redis-cost.md, "diffusion by cost"): read diffusion costs Redis less from 10
   * members on, and a write-diffused message holds Redis ~25 µs per member.
   */
  LARGE_GROUP_THRESHOLD: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 100 }),
  /** Fewest entries between two snapshots of a user stream; the interval is the user's conversation count when that is more. */
  SNAPSHOT_EVERY: Type.Integer({ minimum: 2, maximum: 100_000, default: 10 }),
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
  /**
   * Cost units (conversation states carried: snapshot conversations, entries, heads, /unread
   * rows) a user earns back per second, across their sockets and HTTP requests, per process.
   */
  USER_COST_PER_SECOND: Type.Integer({ minimum: 1, maximum: 10_000_000, default: defaultUserBudgetOptions.costPerSecond }),
  /** The most cost units a user spends at once: about the largest snapshot served without waiting. */
  USER_COST_BURST: Type.Integer({ minimum: 1, maximum: 100_000_000, default: defaultUserBudgetOptions.costBurst }),
  /** Client (user token) HTTP requests per second per user, per process; burst 3x. Over it: 429. */
  HTTP_USER_REQUESTS_PER_SECOND: Type.Integer({ minimum: 1, maximum: 10_000, default: defaultUserBudgetOptions.httpRequestsPerSecond }),
  /**
   * postgres://user:pass@host:port/db: turns the durable tier on (PostgreSQL 15+ behind Redis,
   * docs/durable.md). Needs a Redis engine (REDIS_URL or REDIS_CLUSTER_NODES). Unset → off.
   */
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  /** How often (ms) each process drains what PostgreSQL does not have yet, at least (a full batch drains again at once). */
  PERSIST_INTERVAL_MS: Type.Integer({ minimum: 10, maximum: 60_000, default: 200 }),
  /** Dirty marks one drain takes per shard (records and conversations), i.e. the rows of one upsert at most. */
  PERSIST_BATCH: Type.Integer({ minimum: 1, maximum: 50_000, default: 2_000 }),
  /** Marks waiting for PostgreSQL above which a warning is logged (they wait in Redis memory). */
  PERSIST_BACKLOG_WARN: Type.Integer({ minimum: 1, maximum: 1_000_000_000, default: 1_000_000 }),
  /** Seconds without activity after which a user PostgreSQL holds is removed from Redis (restored on its next touch); 0: never. Default 30 days. */
  COLD_AFTER_SECONDS: Type.Integer({ minimum: 0, maximum: 315_360_000, default: 2_592_000 }),
  /** Seconds between two passes of the cold sweep, at most. */
  COLD_SWEEP_SECONDS: Type.Integer({ minimum: 1, maximum: 86_400, default: 60 }),
  /** Seconds between two runs of the in-server reconcile job (which repairs what it finds); 0: off. */
  RECONCILE_EVERY: Type.Integer({ minimum: 0, maximum: 31_536_000, default: 0 }),
  /** Users and conversations the reconcile job checks per second, so production traffic is not hurt. */
  RECONCILE_RATE: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 200 }),
  /** A message seq more than this above its conversation's head (0 for a new one) is a jump (counted, logged, refused); 0: no check. */
  MAX_SEQ_JUMP: Type.Integer({ minimum: 0, maximum: 281_474_976_710_656, default: DEFAULT_MAX_SEQ_JUMP }),
  /** What a jump gets: `refuse` (422 seq_jump, nothing applied) or `warn` (counted and logged, applied). */
  SEQ_JUMP_ACTION: Type.Union([Type.Literal('refuse'), Type.Literal('warn')], { default: 'refuse' }),
  /**
   * A read more than this above its conversation's head is capped at head + MAX_READ_AHEAD
   * (counted in redpoint_reads_capped_total, logged); 0: no cap. Not 0 by default: a read may
   * overtake the ingest of what it reads, but a buggy client's read of seq 999 at head 2 would
   * otherwise silence every message up to 999 for good.
   */
  MAX_READ_AHEAD: Type.Integer({ minimum: 0, maximum: 281_474_976_710_656, default: DEFAULT_MAX_READ_AHEAD }),
  /**
   * Most conversations one user may be a member of: a membership call leaves out a user it would
   * add to one more (422 conversation_limit, the rest applied); 0: no cap. The default is what the heavy-user
   * bench shows one user can cost without slowing everyone else (docs/security.md).
   */
  MAX_CONVERSATIONS_PER_USER: Type.Integer({ minimum: 0, maximum: 10_000_000, default: DEFAULT_MAX_CONVERSATIONS_PER_USER }),
  /** Read receipts: at most one `reads` push per conversation per this long (per process and per socket), always the latest. */
  RECEIPTS_PUSH_INTERVAL_MS: Type.Integer({ minimum: 10, maximum: 600_000, default: 1000 }),
  /** Read receipts: conversations of at most this many members say who read (pushes, GET .../reads); larger ones only count. */
  RECEIPTS_DETAIL_MEMBERS: Type.Integer({ minimum: 2, maximum: 1000, default: 30 }),
  /**
   * Read receipts: a sender's own message raises their read position too (three more store
   * commands per sender and conversation of an ingest batch: bench/reports/receipts.md). Off: the
   * message path is unchanged, and a sender's position follows their reads (a client marks read
   * what it shows).
   */
  RECEIPTS_ON_SEND: Type.Union(
    ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
    { default: 'false' },
  ),
  /**
   * Server threads serving the one port (Redis engines only): 0 picks one per core in production
   * and 1 in dev mode. The memory engine always runs one (its state lives in one thread).
   */
  WORKERS: Type.Integer({ minimum: 0, maximum: 64, default: 0 }),
  /**
   * Ingest from a transactional outbox in PostgreSQL (docs/queue-ingest.md): postgres://... of the
   * database holding the table; unset: no outbox.
   */
  INGEST_OUTBOX_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  /** The outbox table (optionally `schema.table`, lower case); created with its `_retry` and `_dead` tables when missing. */
  INGEST_OUTBOX_TABLE: Type.String({ pattern: OUTBOX_TABLE_PATTERN, default: 'redpoint_outbox' }),
  /** Ingest from NATS JetStream: nats://host:port[,nats://...]; unset: no JetStream. */
  INGEST_NATS_URL: Type.Optional(Type.String({ pattern: '^(nats|tls)://' })),
  /** The stream (created when missing, work-queue retention) and its dead-letter stream `<stream>_DEAD`. */
  INGEST_NATS_STREAM: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$', default: 'REDPOINT_INGEST' }),
  /** The subject records are published on; dead letters go to `<subject>.dead`. */
  INGEST_NATS_SUBJECT: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'redpoint.ingest' }),
  /** Queue records taken and applied per batch, per source. */
  INGEST_BATCH: Type.Integer({ minimum: 1, maximum: 10_000, default: DEFAULT_QUEUE_BATCH }),
  /** Seconds a queue record naming an unknown conversation (its membership may be behind it) is retried before the dead letter. */
  INGEST_RETRY_SECONDS: Type.Integer({ minimum: 0, maximum: 604_800, default: DEFAULT_RETRY_SECONDS }),
  // --- The badge hook (server/hook/, docs/badge-hook.md): on when BADGE_HOOK_URL or BADGE_HOOK_NATS_URL is set.
  /** http(s):// URL the push service receives signed badge events on; unset: no webhook. */
  BADGE_HOOK_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** The webhook's shared secret (HMAC-SHA256 over `timestamp.body`): needed with BADGE_HOOK_URL, 32+ characters. */
  BADGE_HOOK_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  /** nats://host:port[,...] the badge events are published to; unset: no NATS. */
  BADGE_HOOK_NATS_URL: Type.Optional(Type.String({ pattern: '^(nats|tls)://' })),
  /** The subject badge events are published on, `<subject>.<uid>` (JetStream when a stream captures it, else core NATS). */
  BADGE_HOOK_NATS_SUBJECT: Type.String({ pattern: '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$', default: 'redpoint.badge' }),
  /** At most one event per user per this many ms (coalesced: always the latest badge). */
  BADGE_HOOK_INTERVAL_MS: Type.Integer({ minimum: 10, maximum: 3_600_000, default: 1_000 }),
  /** Delivery attempts of one event before it counts as a dead letter (and the user is retried after BADGE_HOOK_PARK_MS). */
  BADGE_HOOK_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 20, default: 6 }),
  /** The first retry's backoff (ms); each next one doubles, with jitter. */
  BADGE_HOOK_RETRY_MS: Type.Integer({ minimum: 1, maximum: 60_000, default: 250 }),
  /** One webhook request's timeout (ms). */
  BADGE_HOOK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 60_000, default: 5_000 }),
  /** After a dead letter, the user's latest badge is tried again this many ms later (a push service that comes back gets it). */
  BADGE_HOOK_PARK_MS: Type.Integer({ minimum: 100, maximum: 86_400_000, default: 60_000 }),
  /** true: no event while the user has a live WebSocket in any server process; its last socket's close delivers what changed meanwhile. */
  BADGE_HOOK_SOCKETLESS_ONLY: Type.Union(
    ['true', 'false', '1', '0'].map((v) => Type.Literal(v)),
    { default: 'false' },
  ),
  /** Users delivered at once per process, at most (the rest wait as marks in the store, one per user). */
  BADGE_HOOK_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 1_000, default: 32 }),
  /** pino level. */
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
});

type EnvValues = Static<typeof Env>;
/** Every variable the server reads (the deploy kit's test checks its files use no other). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(Env.properties);
const checkEnv = TypeCompiler.Compile(Env);

export interface Config extends AuthSettings {
  port: number;
  host: string;
  /** Port of the operations listener; undefined → the operations endpoints are on `port`. */
  opsPort?: number | undefined;
  /** Bound of one store call (STORE_TIMEOUT_MS); default 2000. */
  storeTimeoutMs?: number;
  /** WORKERS as given (0: automatic); `workerCount` says how many run. */
  workers?: number;
  /** Start on a Redis whose maxmemory-policy may evict keys (REDIS_ALLOW_EVICTION). */
  redisAllowEviction?: boolean;
  redisUrl: string | undefined;
  /** Redis Cluster seed nodes (REDIS_CLUSTER_NODES); never set together with `redisUrl`. */
  redisClusterNodes?: readonly RedisNodeAddress[] | undefined;
  /** Sentinels (REDIS_SENTINELS) and the master they watch (REDIS_SENTINEL_MASTER); never with the two above. */
  redisSentinels?: readonly RedisNodeAddress[] | undefined;
  redisSentinelMaster?: string | undefined;
  /** Credentials and TLS of the Sentinel or cluster connections (REDIS_USERNAME, _PASSWORD, _TLS, _TLS_CA_FILE, REDIS_SENTINEL_*). */
  redisAccess?: RedisAccess | undefined;
  /** Replicas a write must reach before it is acknowledged (REDIS_WAIT_REPLICAS; 0 or absent: none), and how long to wait for them. */
  redisWaitReplicas?: number;
  redisWaitTimeoutMs?: number;
  /** Browser origins allowed to call the HTTP API (CORS); unset: none (no CORS headers). */
  corsOrigins?: CorsOrigins | undefined;
  /** No credentials configured: published dev credentials, loopback only. */
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
  /** Seq sanity (0: off; absent: DEFAULT_MAX_SEQ_JUMP), and what a jump gets. */
  maxSeqJump?: number;
  seqJumpAction?: 'refuse' | 'warn';
  /** Queue ingest (INGEST_*): the outbox and JetStream sources, when set. */
  queue?: QueueConfig;
  /** Reads above head + this are capped there (MAX_READ_AHEAD; 0: no cap; absent: 1000). */
  maxReadAhead?: number;
  /** Conversations per user (MAX_CONVERSATIONS_PER_USER; 0: no cap; absent: the default). */
  maxConversationsPerUser?: number;
  /** Read receipts (RECEIPTS_*); absent: the defaults. */
  receipts?: ReceiptsOptions & { onSend: boolean };
  /** WebSocket tuning; anything left out takes the default of `defaultWsOptions`. */
  ws?: Partial<WsOptions>;
  /** Per-user cost budget and client HTTP rate; anything left out takes `defaultUserBudgetOptions`. */
  userBudget?: Partial<UserBudgetOptions>;
  /** The durable tier (DATABASE_URL); absent: off. */
  durable?: DurableConfig | undefined;
  /** The badge hook (BADGE_HOOK_*); absent: off. */
  badgeHook?: BadgeHookConfig | undefined;
}

/** The badge hook (server/hook/, docs/badge-hook.md): a webhook, a NATS subject, or both. */
export interface BadgeHookConfig {
  webhook?: { url: string; secret: string; timeoutMs: number } | undefined;
  nats?: { url: string; subject: string } | undefined;
  intervalMs: number;
  attempts: number;
  retryMs: number;
  parkMs: number;
  concurrency: number;
  /** No event while the user has a live socket in any process (server/hook/presence.ts). */
  socketlessOnly: boolean;
}

export interface DurableConfig {
  databaseUrl: string;
  persistIntervalMs: number;
  persistBatch: number;
  backlogWarn: number;
  /** 0: users never leave Redis. */
  coldAfterSeconds: number;
  coldSweepSeconds: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const SECRET = new Set([
  'REDPOINT_API_KEY',
  'REDPOINT_API_KEYS',
  'REDPOINT_JWT_SECRET',
  'REDIS_URL',
  'DATABASE_URL',
  'INGEST_OUTBOX_URL',
  'INGEST_NATS_URL',
  'BADGE_HOOK_SECRET',
  'BADGE_HOOK_NATS_URL',
  'REDIS_PASSWORD',
  'REDIS_SENTINEL_PASSWORD',
]);
const NUMERIC = new Set([
  'PORT',
  'OPS_PORT',
  'STORE_TIMEOUT_MS',
  'LARGE_GROUP_THRESHOLD',
  'SNAPSHOT_EVERY',
  'STREAM_MAX_LEN',
  'STREAM_IDLE_SECONDS',
  'WS_VERSION_EVERY_SECONDS',
  'WS_HELLO_TIMEOUT_MS',
  'WS_MAX_CONNECTIONS_PER_USER',
  'WS_FRAMES_PER_SECOND',
  'WS_IDLE_TIMEOUT_SECONDS',
  'USER_COST_PER_SECOND',
  'USER_COST_BURST',
  'HTTP_USER_REQUESTS_PER_SECOND',
  'REDPOINT_JWT_MAX_TTL_SECONDS',
  'REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS',
  'RECONCILE_EVERY',
  'RECONCILE_RATE',
  'MAX_SEQ_JUMP',
  'MAX_READ_AHEAD',
  'MAX_CONVERSATIONS_PER_USER',
  'RECEIPTS_PUSH_INTERVAL_MS',
  'RECEIPTS_DETAIL_MEMBERS',
  'WORKERS',
  'PERSIST_INTERVAL_MS',
  'PERSIST_BATCH',
  'PERSIST_BACKLOG_WARN',
  'COLD_AFTER_SECONDS',
  'COLD_SWEEP_SECONDS',
  'INGEST_BATCH',
  'INGEST_RETRY_SECONDS',
  'REDIS_WAIT_REPLICAS',
  'REDIS_WAIT_TIMEOUT_MS',
  'BADGE_HOOK_INTERVAL_MS',
  'BADGE_HOOK_ATTEMPTS',
  'BADGE_HOOK_RETRY_MS',
  'BADGE_HOOK_TIMEOUT_MS',
  'BADGE_HOOK_PARK_MS',
  'BADGE_HOOK_CONCURRENCY',
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
  let redisSentinels: RedisNodeAddress[] | undefined;
  if (typeof raw.REDIS_SENTINELS === 'string') {
    try {
      redisSentinels = parseClusterNodes(raw.REDIS_SENTINELS);
    } catch (err) {
      problems.push(`REDIS_SENTINELS: ${(err as Error).message}`);
    }
  }
  const redisAccess = redisAccessOf(raw, problems);
  let corsOrigins: CorsOrigins | undefined;
  if (typeof raw.CORS_ORIGINS === 'string') {
    try {
      corsOrigins = parseCorsOrigins(raw.CORS_ORIGINS);
    } catch (err) {
      problems.push(`CORS_ORIGINS: ${(err as Error).message}`);
    }
  }
  // Environment values are strings: the credential checks run even when another variable is bad.
  const credentials = resolveCredentials(raw as CredentialEnv, problems);
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  const values = raw as EnvValues;
  if ([redisClusterNodes, redisSentinels, values.REDIS_URL].filter((t) => t !== undefined).length > 1) throw new ConfigError(BOTH_TARGETS);
  const redisConfigured = redisClusterNodes !== undefined || redisSentinels !== undefined || values.REDIS_URL !== undefined;
  const misplaced = [
    ...(values.REDIS_URL !== undefined
      ? (['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_TLS'] as const).filter((k) => raw[k] !== undefined && raw[k] !== 'false' && raw[k] !== '0')
      : []),
    ...(redisSentinels === undefined
      ? (['REDIS_SENTINEL_MASTER', 'REDIS_SENTINEL_USERNAME', 'REDIS_SENTINEL_PASSWORD'] as const).filter((k) => raw[k] !== undefined)
      : []),
    ...(!redisConfigured && values.REDIS_WAIT_REPLICAS > 0 ? ['REDIS_WAIT_REPLICAS'] : []),
  ];
  if (misplaced.length > 0) {
    throw new ConfigError(
      `${misplaced.join(', ')}: not used with this Redis target (REDIS_URL carries its own user, password and rediss://; the REDIS_SENTINEL_* settings need REDIS_SENTINELS; REDIS_WAIT_REPLICAS needs Redis)`,
    );
  }
  if (values.REDIS_WAIT_REPLICAS > 0 && values.REDIS_WAIT_TIMEOUT_MS >= values.STORE_TIMEOUT_MS) {
    throw new ConfigError(
      `REDIS_WAIT_TIMEOUT_MS (${values.REDIS_WAIT_TIMEOUT_MS}) must be below STORE_TIMEOUT_MS (${values.STORE_TIMEOUT_MS}): a WAIT holds its connection, and the commands queued behind it must still answer within the store timeout`,
    );
  }
  if (values.DATABASE_URL !== undefined && values.REDIS_URL === undefined && !redisClusterNodes && !redisSentinels) {
    throw new ConfigError(
      'DATABASE_URL needs a Redis engine (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS): the durable tier sits behind Redis; the memory engine keeps everything in one process and has nothing to restore from',
    );
  }
  if (values.OPS_PORT !== undefined && values.OPS_PORT !== 0 && values.OPS_PORT === values.PORT) {
    throw new ConfigError(`OPS_PORT must differ from PORT (both ${values.PORT}); leave OPS_PORT unset to serve the operations endpoints on PORT`);
  }
  const { devMode } = credentials;
  return {
    port: values.PORT,
    host: devMode ? '127.0.0.1' : values.HOST,
    opsPort: values.OPS_PORT,
    storeTimeoutMs: values.STORE_TIMEOUT_MS,
    workers: values.WORKERS,
    redisAllowEviction: values.REDIS_ALLOW_EVICTION === 'true' || values.REDIS_ALLOW_EVICTION === '1',
    redisUrl: values.REDIS_URL,
    redisClusterNodes,
    redisSentinels,
    redisSentinelMaster: values.REDIS_SENTINEL_MASTER,
    redisAccess,
    redisWaitReplicas: values.REDIS_WAIT_REPLICAS,
    redisWaitTimeoutMs: values.REDIS_WAIT_TIMEOUT_MS,
    apiKey: credentials.apiKey,
    apiKeys: credentials.apiKeys,
    jwtSecret: credentials.jwtSecret,
    jwks: credentials.jwks,
    jwtIssuer: values.REDPOINT_JWT_ISSUER,
    jwtAudience: values.REDPOINT_JWT_AUDIENCE,
    jwtMaxTtlSeconds: values.REDPOINT_JWT_MAX_TTL_SECONDS,
    jwtClockToleranceSeconds: values.REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS,
    corsOrigins,
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
    durable:
      values.DATABASE_URL === undefined
        ? undefined
        : {
            databaseUrl: values.DATABASE_URL,
            persistIntervalMs: values.PERSIST_INTERVAL_MS,
            persistBatch: values.PERSIST_BATCH,
            backlogWarn: values.PERSIST_BACKLOG_WARN,
            coldAfterSeconds: values.COLD_AFTER_SECONDS,
            coldSweepSeconds: values.COLD_SWEEP_SECONDS,
          },
    badgeHook: badgeHookOf(values),
    queue: {
      outbox: values.INGEST_OUTBOX_URL !== undefined ? { url: values.INGEST_OUTBOX_URL, table: values.INGEST_OUTBOX_TABLE } : undefined,
      nats:
        values.INGEST_NATS_URL !== undefined
          ? { url: values.INGEST_NATS_URL, stream: values.INGEST_NATS_STREAM, subject: values.INGEST_NATS_SUBJECT }
          : undefined,
      batch: values.INGEST_BATCH,
      retrySeconds: values.INGEST_RETRY_SECONDS,
    },
    maxReadAhead: values.MAX_READ_AHEAD,
    maxConversationsPerUser: values.MAX_CONVERSATIONS_PER_USER,
    receipts: {
      pushIntervalMs: values.RECEIPTS_PUSH_INTERVAL_MS,
      detailMembers: values.RECEIPTS_DETAIL_MEMBERS,
      onSend: values.RECEIPTS_ON_SEND === 'true' || values.RECEIPTS_ON_SEND === '1',
    },
    ws: {
      versionEverySeconds: values.WS_VERSION_EVERY_SECONDS,
      helloTimeoutMs: values.WS_HELLO_TIMEOUT_MS,
      maxConnectionsPerUser: values.WS_MAX_CONNECTIONS_PER_USER,
      framesPerSecond: values.WS_FRAMES_PER_SECOND,
      framesBurst: values.WS_FRAMES_PER_SECOND * 3,
      idleTimeoutSeconds: values.WS_IDLE_TIMEOUT_SECONDS,
    },
    userBudget: {
      costPerSecond: values.USER_COST_PER_SECOND,
      costBurst: values.USER_COST_BURST,
      httpRequestsPerSecond: values.HTTP_USER_REQUESTS_PER_SECOND,
    },
  };
}

/** The badge hook's block: on when a webhook or a NATS URL is set; a webhook without its secret is refused. */
function badgeHookOf(values: EnvValues): BadgeHookConfig | undefined {
  const url = values.BADGE_HOOK_URL;
  if (url !== undefined && values.BADGE_HOOK_SECRET === undefined) throw new ConfigError('BADGE_HOOK_URL needs BADGE_HOOK_SECRET (32+ characters)');
  if (url === undefined && values.BADGE_HOOK_NATS_URL === undefined) return undefined;
  return {
    webhook: url !== undefined ? { url, secret: values.BADGE_HOOK_SECRET ?? '', timeoutMs: values.BADGE_HOOK_TIMEOUT_MS } : undefined,
    nats: values.BADGE_HOOK_NATS_URL !== undefined ? { url: values.BADGE_HOOK_NATS_URL, subject: values.BADGE_HOOK_NATS_SUBJECT } : undefined,
    intervalMs: values.BADGE_HOOK_INTERVAL_MS,
    attempts: values.BADGE_HOOK_ATTEMPTS,
    retryMs: values.BADGE_HOOK_RETRY_MS,
    parkMs: values.BADGE_HOOK_PARK_MS,
    concurrency: values.BADGE_HOOK_CONCURRENCY,
    socketlessOnly: values.BADGE_HOOK_SOCKETLESS_ONLY === 'true' || values.BADGE_HOOK_SOCKETLESS_ONLY === '1',
  };
}

/**
 * The effective configuration for the start-up log: every setting after defaults, with the
 * secrets masked (their length is shown, so an operator can tell a key was set) and the Redis
 * password hidden.
 */
export function describeConfig(config: Config): Record<string, unknown> {
  const mask = (secret: string | undefined, dev: string): string | null =>
    secret === undefined ? null : secret === dev ? `${dev} (dev mode, published)` : `*** (${secret.length} chars)`;
  return {
    port: config.port,
    host: config.host,
    opsPort: config.opsPort ?? null,
    workers: workerCount(config),
    redis: redisTargetDescription(config),
    durable: config.durable
      ? {
          database: withoutPassword(config.durable.databaseUrl),
          persistIntervalMs: config.durable.persistIntervalMs,
          persistBatch: config.durable.persistBatch,
          coldAfterSeconds: config.durable.coldAfterSeconds,
          coldSweepSeconds: config.durable.coldSweepSeconds,
        }
      : null,
    devMode: config.devMode,
    apiKey: mask(config.apiKey, DEV_API_KEY),
    apiKeys: (config.apiKeys ?? []).map((k) => `${k.name}: *** (${k.key.length} chars)`),
    jwtSecret: mask(config.jwtSecret, DEV_JWT_SECRET),
    jwks: config.jwks ? ('url' in config.jwks ? { url: withoutQuery(config.jwks.url) } : { file: config.jwks.file }) : null,
    jwtIssuer: config.jwtIssuer ?? null,
    jwtAudience: config.jwtAudience ?? null,
    jwtMaxTtlSeconds: config.jwtMaxTtlSeconds ?? null,
    jwtClockToleranceSeconds: config.jwtClockToleranceSeconds ?? null,
    corsOrigins: config.corsOrigins ?? null,
    storeTimeoutMs: config.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS,
    redisAllowEviction: config.redisAllowEviction ?? false,
    redisAccess: describeAccess(config.redisAccess),
    redisWaitReplicas: config.redisWaitReplicas ?? 0,
    redisWaitTimeoutMs: config.redisWaitTimeoutMs ?? null,
    largeGroupThreshold: config.largeGroupThreshold,
    snapshotEvery: config.snapshotEvery,
    streamMaxLen: config.streamMaxLen,
    streamIdleSeconds: config.streamIdleSeconds ?? null,
    logLevel: config.logLevel,
    // What decides which requests are refused or capped: an operator checks these first.
    maxSeqJump: config.maxSeqJump ?? DEFAULT_MAX_SEQ_JUMP,
    seqJumpAction: config.seqJumpAction ?? 'refuse',
    maxReadAhead: config.maxReadAhead ?? DEFAULT_MAX_READ_AHEAD,
    maxConversationsPerUser: config.maxConversationsPerUser ?? DEFAULT_MAX_CONVERSATIONS_PER_USER,
    reconcileEverySeconds: config.reconcileEverySeconds ?? 0,
    queue: {
      outbox: config.queue?.outbox ? { url: withoutQuery(config.queue.outbox.url), table: config.queue.outbox.table } : null,
      nats: config.queue?.nats ? { url: withoutQuery(config.queue.nats.url), stream: config.queue.nats.stream, subject: config.queue.nats.subject } : null,
      batch: config.queue?.batch ?? DEFAULT_QUEUE_BATCH,
      retrySeconds: config.queue?.retrySeconds ?? DEFAULT_RETRY_SECONDS,
    },
    badgeHook: config.badgeHook
      ? {
          webhook: config.badgeHook.webhook ? { url: withoutQuery(config.badgeHook.webhook.url), secret: mask(config.badgeHook.webhook.secret, '') } : null,
          nats: config.badgeHook.nats ? { url: withoutQuery(config.badgeHook.nats.url), subject: config.badgeHook.nats.subject } : null,
          intervalMs: config.badgeHook.intervalMs,
          attempts: config.badgeHook.attempts,
          socketlessOnly: config.badgeHook.socketlessOnly,
        }
      : null,
    ws: { ...defaultWsOptions, ...config.ws },
    userBudget: { ...defaultUserBudgetOptions, ...config.userBudget },
  };
}

/** REDIS_USERNAME, _PASSWORD, _TLS, _TLS_CA_FILE and REDIS_SENTINEL_USERNAME/_PASSWORD; a CA file that cannot be read is a problem. */
function redisAccessOf(raw: Record<string, unknown>, problems: string[]): RedisAccess | undefined {
  const text = (key: string): string | undefined => (typeof raw[key] === 'string' ? (raw[key] as string) : undefined);
  let ca: string | undefined;
  const caFile = text('REDIS_TLS_CA_FILE');
  if (caFile !== undefined) {
    try {
      ca = readFileSync(caFile, 'utf8');
      if (!ca.includes('-----BEGIN CERTIFICATE-----')) problems.push(`REDIS_TLS_CA_FILE: ${caFile} holds no PEM certificate`);
    } catch (err) {
      problems.push(`REDIS_TLS_CA_FILE: cannot read ${caFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  const access: RedisAccess = {
    username: text('REDIS_USERNAME'),
    password: text('REDIS_PASSWORD'),
    tls: raw.REDIS_TLS === 'true' || raw.REDIS_TLS === '1',
    ca,
    sentinelUsername: text('REDIS_SENTINEL_USERNAME'),
    sentinelPassword: text('REDIS_SENTINEL_PASSWORD'),
  };
  const set = Object.fromEntries(Object.entries(access).filter(([, v]) => v !== undefined && v !== false)) as RedisAccess;
  return Object.keys(set).length > 0 ? set : undefined;
}

function describeAccess(access: RedisAccess | undefined): Record<string, unknown> | null {
  if (!access) return null;
  return {
    username: access.username ?? null,
    password: access.password !== undefined ? '***' : null,
    tls: access.tls ?? false,
    ca: access.ca !== undefined ? 'from REDIS_TLS_CA_FILE' : null,
    sentinelUsername: access.sentinelUsername ?? null,
    sentinelPassword: access.sentinelPassword !== undefined ? '***' : null,
  };
}

/** A URL without its query and credentials (either may carry a token). */
function withoutQuery(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(not a URL)';
  }
}

function redisTargetDescription(config: Config): string | null {
  const target = redisTargetOf(config);
  return target ? describeRedisTarget(target) : null;
}

/**
 * How many server threads run: WORKERS, or one per core in production and one in dev mode. The
 * memory engine always runs one: its state lives in the thread that holds it.
 */
export function workerCount(
  config: Pick<Config, 'workers' | 'devMode' | 'redisUrl' | 'redisClusterNodes' | 'redisSentinels'>,
  cores: number = availableParallelism(),
): number {
  const redis = config.redisUrl !== undefined || (config.redisClusterNodes?.length ?? 0) > 0 || (config.redisSentinels?.length ?? 0) > 0;
  if (!redis) return 1;
  const wanted = config.workers ?? 0;
  if (wanted > 0) return wanted;
  return config.devMode ? 1 : Math.max(1, cores);
}

function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}
