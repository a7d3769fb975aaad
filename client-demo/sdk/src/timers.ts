/** The timers the client uses, injectable so tests can record or drive them. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle as Parameters<typeof globalThis.clearTimeout>[0]),
};

/** One named timer that is either armed or not; arming it again while armed keeps the first deadline. */
export class Timer {
  private handle: unknown = undefined;

  constructor(
    private readonly timers: Timers,
    private readonly fire: () => void,
  ) {}

  arm(ms: number): void {
    if (this.handle !== undefined) return;
    this.handle = this.timers.setTimeout(() => {
      this.handle = undefined;
      this.fire();
    }, ms);
  }

  /** Re-arm with a new deadline, replacing any pending one. */
  rearm(ms: number): void {
    this.cancel();
    this.arm(ms);
  }

  cancel(): void {
    if (this.handle === undefined) return;
    this.timers.clearTimeout(this.handle);
    this.handle = undefined;
  }
}
