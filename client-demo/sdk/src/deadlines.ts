import type { Timers } from './timers.js';

/** A request frame's id, or the hello (answered by `welcome`, then a `sync` or `error` without id). */
export type RequestKey = number | 'hello';

/**
 * The server answers every request frame within a few seconds, or closes the connection
 * (PROTOCOL.md). A request still unanswered after `timeoutMs` means the connection is broken in a
 * way no close event reports (a reply dropped on the way, a half-open TCP connection): `expired`
 * is called once, and the caller drops the connection.
 */
export class Deadlines {
  private readonly pending = new Map<RequestKey, unknown>();

  constructor(
    private readonly timers: Timers,
    private readonly timeoutMs: number,
    private readonly expired: (key: RequestKey) => void,
  ) {}

  start(key: RequestKey): void {
    this.settle(key);
    const handle = this.timers.setTimeout(() => {
      this.pending.delete(key);
      this.clear();
      this.expired(key);
    }, this.timeoutMs);
    this.pending.set(key, handle);
  }

  /** A part of the answer arrived (a snapshot in parts): the request is alive, its clock starts again. */
  extend(key: RequestKey): void {
    if (this.pending.has(key)) this.start(key);
  }

  settle(key: RequestKey): void {
    const handle = this.pending.get(key);
    if (handle === undefined) return;
    this.timers.clearTimeout(handle);
    this.pending.delete(key);
  }

  clear(): void {
    for (const handle of this.pending.values()) this.timers.clearTimeout(handle);
    this.pending.clear();
  }
}
