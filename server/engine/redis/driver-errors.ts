import { ReplyError } from 'ioredis';
import { OutcomeUnknownError, StoreError, type StoreErrorKind, StoreUnavailableError } from '../store-errors.js';

/**
 * The one place that reads ioredis's errors and turns them into the engine's typed errors
 * (store-errors.ts). Two things decide the type:
 *
 * - whether the command was SENT: one that never left the client (no ready connection, the
 *   offline queue disabled) was not applied; one written to a socket that then timed out or
 *   dropped may have been;
 * - whether the connection is still the one it was sent on: a refusal (CLUSTERDOWN, LOADING...)
 *   proves that attempt did not run, but ioredis resends in-flight commands after a reconnect
 *   (and a Cluster after MOVED), so a refusal that came back over another connection says
 *   nothing about the first attempt.
 *
 * Anything else (a Lua error, INFO denied by an ACL) is not store trouble and is returned as is.
 */
export interface SendState {
  /** The command was handed to a ready connection. */
  sent: boolean;
  /** The connection serving the key is still the one it was sent on. */
  sameConnection: boolean;
}

/** Redis error codes (the first word of an error reply) that refuse a command without running it. */
const REFUSALS: Readonly<Record<string, StoreErrorKind>> = {
  CLUSTERDOWN: 'cluster_down',
  LOADING: 'loading',
  BUSY: 'busy',
  READONLY: 'readonly',
  OOM: 'oom',
  MISCONF: 'misconf',
  MASTERDOWN: 'masterdown',
  NOREPLICAS: 'noreplicas',
  MOVED: 'redirect',
  ASK: 'redirect',
  TRYAGAIN: 'redirect',
};

/** ioredis's own messages (it has no error classes for these). */
const TIMED_OUT = 'Command timed out';
const NOT_WRITABLE = "Stream isn't writeable and enableOfflineQueue options is false";
const CLUSTER_NOT_READY = "Cluster isn't ready and enableOfflineQueue options is false";
const CONNECTION_CLOSED = 'Connection is closed.';
const REDIRECTIONS = 'Too many Cluster redirections.';
/** Socket errors a command can fail with when the connection breaks under it. */
const SOCKET_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);

/** The typed store error for a driver error, or undefined when it is not store trouble. */
export function storeErrorOf(err: unknown, state: SendState): StoreError | undefined {
  if (err instanceof StoreError) return err;
  if (!(err instanceof Error)) return undefined;
  const applied = (kind: StoreErrorKind, what: string): StoreError =>
    state.sent
      ? new OutcomeUnknownError(kind, `${what}; the command may have been applied`, { cause: err })
      : new StoreUnavailableError(kind, `${what}; nothing was sent`, { cause: err });

  if (err instanceof ReplyError) {
    const code = err.message.split(' ', 1)[0] ?? '';
    const kind = REFUSALS[code];
    if (kind === undefined) return undefined;
    // The reply proves this attempt did not run; an earlier one over another connection might have.
    if (!state.sent || state.sameConnection) return new StoreUnavailableError(kind, `Redis refused the command (${code})`, { cause: err });
    return new OutcomeUnknownError(kind, `Redis refused a resent command (${code}); the first attempt may have been applied`, { cause: err });
  }
  if (err.message === NOT_WRITABLE || err.message === CLUSTER_NOT_READY) {
    return new StoreUnavailableError('not_ready', 'no ready Redis connection; nothing was sent', { cause: err });
  }
  if (err.message === TIMED_OUT) return applied('timeout', 'no reply from Redis within the store timeout');
  if (err.message.startsWith(REDIRECTIONS)) return applied('redirect', 'Redis Cluster kept redirecting the command');
  const code = (err as NodeJS.ErrnoException).code;
  if (
    err.name === 'AbortError' ||
    err.name === 'MaxRetriesPerRequestError' ||
    err.message === CONNECTION_CLOSED ||
    (code !== undefined && SOCKET_CODES.has(code))
  ) {
    return applied('connection_lost', 'the Redis connection was lost');
  }
  return undefined;
}
