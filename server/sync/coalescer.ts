/**
 * At most one `emit` per key per `intervalMs`, always with the latest value: the first `put` of a
 * quiet key goes out at once; later ones within the interval replace each other and the last goes
 * out when the interval ends. Read receipts use it twice (server/sync/receipts.ts per
 * conversation, server/gateway/fanout.ts per user and conversation), so a 500-member group reading
 * one message does not become 500 × 500 frames.
 */
export class Coalescer<V> {
  /** key → the value waiting for the end of its key's interval (undefined: none waiting, the interval still runs). */
  private readonly quiet = new Map<string, { timer: NodeJS.Timeout; waiting: V | undefined }>();

  constructor(
    private readonly intervalMs: number,
    private readonly emit: (key: string, value: V) => void,
  ) {}

  put(key: string, value: V): void {
    const slot = this.quiet.get(key);
    if (slot) {
      slot.waiting = value;
      return;
    }
    this.emit(key, value);
    this.startInterval(key);
  }

  /** Keys with a value waiting (tests, metrics). */
  get pending(): number {
    let n = 0;
    for (const slot of this.quiet.values()) if (slot.waiting !== undefined) n++;
    return n;
  }

  /** Drops everything waiting (shutdown). */
  close(): void {
    for (const slot of this.quiet.values()) clearTimeout(slot.timer);
    this.quiet.clear();
  }

  private startInterval(key: string): void {
    const timer = setTimeout(() => {
      const slot = this.quiet.get(key);
      this.quiet.delete(key);
      if (slot?.waiting === undefined) return;
      this.emit(key, slot.waiting);
      this.startInterval(key);
    }, this.intervalMs);
    timer.unref();
    this.quiet.set(key, { timer, waiting: undefined });
  }
}
