/**
 * What can go wrong with the store, as the engine reports it: typed errors that say what is known
 * about the change, never the driver's wording. The gateway turns them into wire errors
 * (server/gateway/error-mapper.ts); nothing above the engine looks at a driver message.
 *
 * - StoreUnavailableError: the command was never handed to the store, or the store refused it
 *   (CLUSTERDOWN, LOADING, ...): nothing of THIS call was applied.
 * - OutcomeUnknownError: the command went out and no trustworthy answer came back (a timeout, a
 *   connection lost with the command in flight, a reply that may come from a resend): it may or
 *   may not have been applied. Every write is a max-merge, so the caller retries.
 */

/** Why a store call failed, for the `redpoint_store_errors_total{kind}` metric and logs. */
export type StoreErrorKind =
  /** No ready connection within the store timeout (Redis down, reconnecting, cluster without a master for the slot). */
  | 'not_ready'
  /** Sent, no reply within the store timeout (Redis stuck: CLIENT PAUSE, DEBUG SLEEP, a long script, a network black hole). */
  | 'timeout'
  /** The connection was lost with the command in flight. */
  | 'connection_lost'
  /** A reply came back over another connection or from another Redis run than the command was sent to. */
  | 'untrusted_reply'
  /** Redis Cluster: redirected (MOVED/ASK/TRYAGAIN) until the client gave up. */
  | 'redirect'
  /** The durable tier could not put back a user or conversation Redis lacks (PostgreSQL down, or it vanished again). */
  | 'restore'
  /** Refusals, named after the Redis error code. */
  | 'cluster_down'
  | 'loading'
  | 'busy'
  | 'readonly'
  | 'oom'
  | 'misconf'
  | 'masterdown'
  | 'noreplicas'
  /** The request as a whole ran out of time (the HTTP router's bound, not a store call). */
  | 'deadline';

export abstract class StoreError extends Error {
  abstract readonly outcome: 'not_applied' | 'unknown';
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Nothing of this call was applied; retrying is safe and needed. */
export class StoreUnavailableError extends StoreError {
  override name = 'StoreUnavailableError';
  readonly outcome = 'not_applied' as const;
}

/** The call may or may not have been applied; retry (every write is idempotent). */
export class OutcomeUnknownError extends StoreError {
  override name = 'OutcomeUnknownError';
  readonly outcome = 'unknown' as const;
}

/**
 * For a change made of several store calls: once an earlier call of it has landed, a later one
 * failing with "nothing applied" still leaves the change half made. The caller must hear
 * "outcome unknown" (retry), not "unavailable".
 */
export function afterPartOfIt(err: unknown): unknown {
  if (err instanceof StoreUnavailableError)
    return new OutcomeUnknownError(err.kind, `${err.message} (an earlier part of this change was applied)`, { cause: err });
  return err;
}

/** The error of a call that went out in several parts, some of which may have landed. */
export function ofParts(results: readonly PromiseSettledResult<unknown>[]): unknown {
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  const first = failed[0]?.reason;
  return failed.length < results.length ? afterPartOfIt(first) : first;
}
