import { same } from './same.js';
import type { RedpointState, StatusEvent } from './types.js';

/** Raised by `ready()` when the client closes for good before it was ever SYNCED. */
export class ClosedError extends Error {
  /** The server's close code, when the server closed it (e.g. 4002 unauthorized); none after `stop()`. */
  readonly closeCode: number | undefined;
  constructor(message: string, closeCode: number | undefined) {
    super(message);
    this.name = 'ClosedError';
    this.closeCode = closeCode;
  }
}

export interface PublisherHooks {
  build(): RedpointState;
  change(state: RedpointState): void;
  status(event: StatusEvent): void;
  /** The close code behind the current connection state, if any. */
  closeCode(): number | undefined;
}

/**
 * The client's state as listeners see it. Every internal step marks it dirty; the state is built
 * again when read, and listeners hear once per microtask, after a burst of frames or calls has
 * settled, and only if the picture differs from the last one they got. An unchanged picture
 * keeps its identity, so `client.state` is a valid `useSyncExternalStore` snapshot.
 */
export class StatePublisher {
  private current: RedpointState;
  private dirty = false;
  private scheduled = false;
  private published: RedpointState | null = null;
  private lastStatusKey = '';
  private readyOutcome: 'synced' | ClosedError | null = null;
  private readonly waiting: Array<{ resolve(): void; reject(err: Error): void }> = [];

  constructor(private readonly hooks: PublisherHooks) {
    this.current = hooks.build();
  }

  get state(): RedpointState {
    if (this.dirty) {
      this.dirty = false;
      const next = this.hooks.build();
      if (!same(next, this.current)) this.current = next;
    }
    return this.current;
  }

  invalidate(): void {
    this.dirty = true;
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.publish());
  }

  /** Resolves on the first SYNCED state; rejects if the client closes for good before that. */
  ready(): Promise<void> {
    if (this.readyOutcome === 'synced') return Promise.resolve();
    if (this.readyOutcome) return Promise.reject(this.readyOutcome);
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  /** The client stopped or closed for good: a `ready()` still waiting will not be met. */
  closed(reason: string, closeCode: number | undefined): void {
    this.fail(new ClosedError(reason, closeCode));
  }

  /** As `closed`, with the error `ready()` rejects with (an `AuthError`). */
  fail(err: ClosedError): void {
    this.settle(err);
  }

  /** The client connects again after closing for good: `ready()` waits for the next SYNCED. */
  reopen(): void {
    if (this.readyOutcome !== 'synced') this.readyOutcome = null;
  }

  private publish(): void {
    this.scheduled = false;
    const state = this.state;
    if (state.status === 'SYNCED') this.settle('synced');
    else if (state.connection === 'closed' || state.connection === 'auth_failed') {
      const code = this.hooks.closeCode();
      this.settle(new ClosedError(`connection closed${code === undefined ? '' : ` (close code ${code})`} before the first sync`, code));
    }
    if (state === this.published) return;
    this.published = state;
    this.hooks.change(state);
    const { status, stale, connection } = state;
    const key = `${status}|${stale}|${connection}`;
    if (key === this.lastStatusKey) return;
    this.lastStatusKey = key;
    const closeCode = this.hooks.closeCode();
    this.hooks.status({ status, stale, connection, ...(closeCode !== undefined ? { closeCode } : {}) });
  }

  private settle(outcome: 'synced' | ClosedError): void {
    if (this.readyOutcome) return;
    this.readyOutcome = outcome;
    for (const waiter of this.waiting.splice(0)) {
      if (outcome === 'synced') waiter.resolve();
      else waiter.reject(outcome);
    }
  }
}
