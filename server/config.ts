import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';

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
  /** Bearer key the message service presents on server-to-server endpoints. */
  REDPOINT_API_KEY: Type.Optional(Type.String({ minLength: 16 })),
  /** HS256 secret of client JWTs (user id in `sub`). */
  REDPOINT_JWT_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  /** Conversations with more members than this use read diffusion. */
  LARGE_GROUP_THRESHOLD: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 500 }),
  /** A snapshot entry in each user stream at least every this many entries. */
  SNAPSHOT_EVERY: Type.Integer({ minimum: 2, maximum: 100_000, default: 100 }),
  /** Stream history kept per user, in entries (trimmed at snapshot boundaries only). */
  STREAM_MAX_LEN: Type.Integer({ minimum: 10, maximum: 10_000_000, default: 1000 }),
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
  apiKey: string;
  jwtSecret: string;
  /** No secrets configured: published dev credentials, loopback only. */
  devMode: boolean;
  largeGroupThreshold: number;
  snapshotEvery: number;
  streamMaxLen: number;
  logLevel: EnvValues['LOG_LEVEL'];
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const NUMERIC = new Set(['PORT', 'LARGE_GROUP_THRESHOLD', 'SNAPSHOT_EVERY', 'STREAM_MAX_LEN']);

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
  if (!checkEnv.Check(raw)) {
    const problems = [...checkEnv.Errors(raw)].map((e) => `${e.path.slice(1)}: ${e.message} (got ${JSON.stringify(e.value)})`);
    throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const values = raw as EnvValues;
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
    apiKey: values.REDPOINT_API_KEY ?? DEV_API_KEY,
    jwtSecret: values.REDPOINT_JWT_SECRET ?? DEV_JWT_SECRET,
    devMode,
    largeGroupThreshold: values.LARGE_GROUP_THRESHOLD,
    snapshotEvery: values.SNAPSHOT_EVERY,
    streamMaxLen: values.STREAM_MAX_LEN,
    logLevel: values.LOG_LEVEL,
  };
}
