import { formatNode, type RedisTarget } from './redis-target.js';

/**
 * A start-up failure said as an operator can act on it: the variable that pointed at the service,
 * the service, its address, and what went wrong there (`DATABASE_URL: PostgreSQL at
 * 127.0.0.1:1 refused the connection`), instead of the driver's `connect ECONNREFUSED 127.0.0.1:1`
 * that names neither.
 */
export class StartFailure extends Error {
  override readonly name = 'StartFailure';
}

/** The configuration variable and the service it names. */
export interface ServiceAt {
  variable: string;
  service: 'PostgreSQL' | 'Redis';
  /** host:port (or a list of them), never with credentials. */
  address: string;
}

/** Network errors that say the service was not reached at all, as a phrase. */
const UNREACHED: Record<string, string> = {
  ECONNREFUSED: 'refused the connection',
  ECONNRESET: 'closed the connection',
  ETIMEDOUT: 'did not answer (timed out)',
  EHOSTUNREACH: 'is unreachable (no route to host)',
  ENETUNREACH: 'is unreachable (no route to network)',
  ENOTFOUND: 'cannot be found (no such host name)',
  EAI_AGAIN: 'cannot be found (the host name did not resolve)',
};

/** The first Node.js error code (ECONNREFUSED...) along the error and its causes, or its aggregate's. */
function networkCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code in UNREACHED) return code;
    const inner = e instanceof AggregateError ? e.errors.map(networkCode).find((c) => c !== undefined) : undefined;
    if (inner) return inner;
  }
  return undefined;
}

/** A PostgreSQL error carries its SQLSTATE (five characters) in `code`. */
function sqlState(err: unknown): string | undefined {
  const code = err instanceof Error ? (err as Error & { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** `host:port` of a postgres:// or redis:// URL (no credentials), or the URL's text when it does not parse. */
export function addressOfUrl(url: string, defaultPort: number): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || defaultPort}`;
  } catch {
    return '(unparsable URL)';
  }
}

/**
 * `err` from reaching PostgreSQL at `at`, named. `doing` is what PostgreSQL refused when it
 * answered with an error of its own (the durable tier's schema, the outbox's tables). A
 * StartFailure (already named) passes through as it is.
 */
export function postgresFailure(at: Omit<ServiceAt, 'service'>, err: unknown, doing: string): StartFailure {
  if (err instanceof StartFailure) return err;
  const where = `${at.variable}: PostgreSQL at ${at.address}`;
  const unreached = networkCode(err);
  if (unreached) return new StartFailure(`${where} ${UNREACHED[unreached]}`, { cause: err });
  const state = sqlState(err);
  // Class 28 (authorization) and 3D (no such database): the login itself was refused.
  if (state?.startsWith('28') || state?.startsWith('3D')) return new StartFailure(`${where} refused the login: ${messageOf(err)}`, { cause: err });
  if (state) return new StartFailure(`${where} refused ${doing}: ${messageOf(err)}`, { cause: err });
  // The connection was cut or timed out before any reply PostgreSQL would give: something that
  // does not speak its protocol listens there (a Redis, an HTTP server), or nothing answers.
  if (/Connection terminated|timeout|ended unexpectedly/i.test(messageOf(err))) {
    return new StartFailure(`${where} did not answer as PostgreSQL (${messageOf(err)})`, { cause: err });
  }
  return new StartFailure(`${where}: ${messageOf(err)}`, { cause: err });
}

/** `err` from connecting to Redis at `at`, named; the engine's other refusals (settings, scripts) are left as they are. */
export function redisFailure(at: Omit<ServiceAt, 'service'>, err: unknown): Error {
  if (err instanceof StartFailure) return err;
  const unreached = networkCode(err) ?? /\b(E[A-Z_]+)\b/.exec(messageOf(err))?.[1];
  if (unreached && unreached in UNREACHED) return new StartFailure(`${at.variable}: Redis at ${at.address} ${UNREACHED[unreached]}`, { cause: err });
  if (/cannot connect to Redis/.test(messageOf(err)))
    return new StartFailure(`${at.variable}: ${messageOf(err).replace('cannot connect to Redis', `cannot connect to Redis at ${at.address}`)}`, { cause: err });
  return err instanceof Error ? err : new Error(messageOf(err));
}

/** The variable that configured a Redis target, and where it points, for redisFailure and the settings warnings. */
export function redisServiceOf(target: RedisTarget): Omit<ServiceAt, 'service'> {
  if (target.url !== undefined) return { variable: 'REDIS_URL', address: addressOfUrl(target.url, 6379) };
  if (target.cluster !== undefined) return { variable: 'REDIS_CLUSTER_NODES', address: target.cluster.map(formatNode).join(',') };
  return { variable: 'REDIS_SENTINELS', address: `master ${target.sentinel.name} of Sentinels ${target.sentinel.sentinels.map(formatNode).join(',')}` };
}
