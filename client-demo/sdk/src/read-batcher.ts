import { Timer, type Timers } from './timers.js';

/** `[conv, seq, gen]`: a read and the read generation it was made in (PROTOCOL.md "Unread from here"). */
export type Reads = Array<[string, number, number]>;

export interface ReadBatcherOptions {
  timers: Timers;
  delayMs: number;
  maxBatch: number;
  retryMs: number;
  /** Sends one read frame; returns its request id, or null when offline (the batch waits). */
  send(reads: Reads): number | null;
}

/**
 * Read reports: queued per conversation (the highest (gen, seq) wins: a read made after an
 * "unread from here" of this device beats one made before it), sent after `delayMs` or as soon as
 * `maxBatch` conversations are queued, and kept until the server acknowledges them. A batch in
 * flight when the connection drops goes back to the queue and is sent again after reconnecting.
 */
export class ReadBatcher {
  /** conv → [seq, gen] */
  private readonly queued = new Map<string, [number, number]>();
  private readonly inflight = new Map<number, Reads>();
  private readonly timer: Timer;

  constructor(private readonly options: ReadBatcherOptions) {
    this.timer = new Timer(options.timers, () => this.flush());
  }

  /** Reads not yet acknowledged (queued or in flight). */
  get pending(): number {
    let n = this.queued.size;
    for (const batch of this.inflight.values()) n += batch.length;
    return n;
  }

  add(conv: string, seq: number, gen: number): void {
    this.queue([[conv, seq, gen]]);
    if (this.queued.size >= this.options.maxBatch) this.flush();
    else this.timer.arm(this.options.delayMs);
  }

  /** Sends every queued read now (in batches of at most `maxBatch`). */
  flush(): void {
    this.timer.cancel();
    while (this.queued.size > 0) {
      const batch: Reads = [...this.queued].slice(0, this.options.maxBatch).map(([conv, [seq, gen]]) => [conv, seq, gen]);
      const id = this.options.send(batch);
      if (id === null) return;
      for (const [conv] of batch) this.queued.delete(conv);
      this.inflight.set(id, batch);
    }
  }

  owns(id: number): boolean {
    return this.inflight.has(id);
  }

  /** The server acknowledged request `id`: returns the reads it carried (undefined: not ours). */
  ack(id: number): Reads | undefined {
    const batch = this.inflight.get(id);
    this.inflight.delete(id);
    return batch;
  }

  /** The server refused request `id` for a passing reason: send it again later. */
  retry(id: number): boolean {
    const batch = this.inflight.get(id);
    if (!batch) return false;
    this.inflight.delete(id);
    this.queue(batch);
    this.timer.rearm(this.options.retryMs);
    return true;
  }

  /** The connection dropped: whatever was in flight may not have arrived. */
  disconnected(): void {
    for (const batch of this.inflight.values()) this.queue(batch);
    this.inflight.clear();
    this.timer.cancel();
  }

  /** Everything not acknowledged, for the cache. */
  unacknowledged(): Reads {
    const all = new Map(this.queued);
    for (const batch of this.inflight.values()) for (const read of batch) keepNewer(all, read);
    return [...all].map(([conv, [seq, gen]]) => [conv, seq, gen]);
  }

  clear(): void {
    this.queued.clear();
    this.inflight.clear();
    this.timer.cancel();
  }

  private queue(reads: Reads): void {
    for (const read of reads) keepNewer(this.queued, read);
  }
}

/** Keeps the lexicographically larger (gen, seq) of `conv`. */
function keepNewer(reads: Map<string, [number, number]>, [conv, seq, gen]: [string, number, number]): void {
  const held = reads.get(conv);
  if (!held || gen > held[1] || (gen === held[1] && seq > held[0])) reads.set(conv, [seq, gen]);
}
