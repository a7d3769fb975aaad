import { type Logger, pino } from 'pino';
import type { StoreError } from './store-errors.js';

/** What store health reports to, if anything (metrics/metrics.ts Metrics has these): the engine's port, no import of the registry. */
export interface StoreHealthMetrics {
  storeUp: { set(labels: { target: string }, value: number): void; remove(labels: { target: string }): void };
  storeErrors: { inc(labels: { kind: string; outcome: string }): void };
  busErrors: { inc(labels: { op: string }): void };
}

interface TargetState {
  up: boolean;
  /** When the target went down (ms since the epoch); undefined while up. */
  downSince: number | undefined;
  cause: string;
  /** The newest error seen on the target: the cause of a later down, and logged with the recovery. */
  lastError: string | undefined;
  /** When a command last timed out on a connection that still looked open. */
  lastTimeout: number;
}

/**
 * The store's health per connection target (`engine@host:port`, each cluster master,
 * `bus-publish@…`, `bus-subscribe@…`), as an operator wants it: ONE log line per state change
 * (`store_down` with the cause, `store_up` with how long it was down), a `redpoint_store_up`
 * gauge per target, and counts of failed store and bus calls by kind.
 *
 * A target goes down when its connection closes, or when a command times out on a connection that
 * still looks open (Redis stuck: CLIENT PAUSE, DEBUG SLEEP, a black-holed network). It comes back
 * when the connection is ready again, or, after timeouts, when a reply arrives and no command has
 * timed out for `quietMs` (so a Redis that answers reads but not writes does not flap).
 */
export class StoreHealth {
  private readonly targets = new Map<string, TargetState>();
  private closing = false;
  /** When a target last went down, a command last timed out, or a store call last failed. */
  private lastTrouble = 0;

  constructor(
    private readonly log: Logger = pino({ level: 'silent' }),
    private readonly metrics?: StoreHealthMetrics,
    /** Store timeout: the quiet time after a timeout before replies count as recovery. */
    private readonly quietMs = 2_000,
  ) {}

  /** A connection to `target` is ready. */
  up(target: string): void {
    const state = this.targets.get(target);
    if (!state) {
      this.targets.set(target, { up: true, downSince: undefined, cause: '', lastError: undefined, lastTimeout: 0 });
      this.metrics?.storeUp.set({ target }, 1);
      if (!this.closing) this.log.info({ event: 'store_connected', target }, `store connected: ${target}`);
      return;
    }
    if (state.up) return;
    const downMs = Date.now() - (state.downSince ?? Date.now());
    state.up = true;
    state.downSince = undefined;
    this.metrics?.storeUp.set({ target }, 1);
    if (!this.closing) {
      this.log.info(
        { event: 'store_up', target, downMs, cause: state.cause, lastError: state.lastError },
        `store up again: ${target} (down ${(downMs / 1000).toFixed(1)} s: ${state.cause})`,
      );
    }
  }

  /** The connection to `target` closed or cannot be opened. */
  down(target: string, cause?: string): void {
    const state = this.stateOf(target);
    this.lastTrouble = Date.now();
    if (!state.up) return;
    state.up = false;
    state.downSince = Date.now();
    state.cause = cause ?? state.lastError ?? 'connection closed';
    this.metrics?.storeUp.set({ target }, 0);
    if (!this.closing) this.log.error({ event: 'store_down', target, cause: state.cause }, `store down: ${target}: ${state.cause}`);
  }

  /**
   * The target is gone for good (a cluster node the client dropped after a failover or resharding):
   * its gauge series goes too, so a node that no longer exists is not reported down forever.
   */
  forget(target: string): void {
    if (!this.targets.delete(target)) return;
    this.metrics?.storeUp.remove({ target });
  }

  /** An error event on the target's connection (remembered as the cause of what follows). */
  sawError(target: string, err: unknown): void {
    this.stateOf(target).lastError = describe(err);
  }

  /** A command sent on an open connection got no reply in time. */
  timedOut(target: string, timeoutMs: number): void {
    this.stateOf(target).lastTimeout = Date.now();
    this.down(target, `no reply within ${timeoutMs} ms (Redis stuck or unreachable)`);
  }

  /** A command got its reply. */
  answered(target: string): void {
    const state = this.targets.get(target);
    if (!state || state.up || Date.now() - state.lastTimeout < this.quietMs) return;
    this.up(target);
  }

  /** When `target` went down, or undefined while it is up (or unknown). */
  downSince(target: string): number | undefined {
    return this.targets.get(target)?.downSince;
  }

  /**
   * Until when a call should wait for `target` to come back: the store timeout from now, but no
   * later than the store timeout after the outage began, so requests during an outage that is
   * already that old fail at once instead of each waiting it out.
   */
  waitDeadline(target: string, timeoutMs: number): number {
    const now = Date.now();
    const since = this.downSince(target);
    return since === undefined ? now + timeoutMs : Math.min(now + timeoutMs, Math.max(now, since + timeoutMs));
  }

  /** A failed store call, counted by kind. */
  failed(err: StoreError): void {
    this.lastTrouble = Date.now();
    this.metrics?.storeErrors.inc({ kind: err.kind, outcome: err.outcome });
  }

  /** Whether the store has been in trouble at any time since `since` (ms since the epoch): a target down, a timeout, a failed call. */
  troubledSince(since: number): boolean {
    if (this.lastTrouble >= since) return true;
    for (const state of this.targets.values()) if (!state.up) return true;
    return false;
  }

  /** A failed subscribe to the store's notifications (pulls repair what it lost). Publishes happen inside the store's scripts. */
  busFailed(op: 'subscribe'): void {
    this.metrics?.busErrors.inc({ op });
  }

  /** Shutting down: connections close on purpose, nothing to report. */
  close(): void {
    this.closing = true;
  }

  private stateOf(target: string): TargetState {
    let state = this.targets.get(target);
    if (!state) {
      // Never seen up (e.g. down from the first attempt): counts as up until told otherwise.
      state = { up: true, downSince: undefined, cause: '', lastError: undefined, lastTimeout: 0 };
      this.targets.set(target, state);
    }
    return state;
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}
