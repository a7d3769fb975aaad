import type { PushSink } from '../clients/types.js';

interface Outstanding {
  remaining: number;
  sentAt: number;
}

/**
 * Deliveries at the clients, and the messages not yet delivered to all their recipients (what a
 * saturation driver keeps bounded). A push announcing lastSeq L tells a client every seq up to L,
 * so a delivery is a (client, seq) pair the client learns of, however many frames it took: a
 * server that merges messages into one push delivers as much with fewer frames.
 */
export class Deliveries {
  /** (client, message) pairs learned of. */
  delivered = 0;
  /** Push frames read. */
  frames = 0;
  /** Messages given up on (not delivered to every recipient within the deadline). */
  lost = 0;
  private readonly outstanding = new Map<string, Map<number, Outstanding>>();
  private pending = 0;
  private wake: (() => void) | undefined;

  /** Messages sent and not yet delivered to every recipient. */
  get inFlight(): number {
    return this.pending;
  }

  /** A message is about to be sent: `recipients` clients should learn of (conv, seq). */
  expect(conv: string, seq: number, recipients: number): void {
    let seqs = this.outstanding.get(conv);
    if (!seqs) {
      seqs = new Map();
      this.outstanding.set(conv, seqs);
    }
    seqs.set(seq, { remaining: recipients, sentAt: performance.now() });
    this.pending += 1;
  }

  /** The message will never be delivered (its POST failed). */
  abandon(conv: string, seq: number): void {
    if (this.outstanding.get(conv)?.delete(seq)) this.done();
  }

  /** The push handler of one client. */
  receiver(): PushSink {
    const known = new Map<string, number>();
    return (conv, lastSeq) => {
      this.frames += 1;
      const before = known.get(conv) ?? 0;
      if (lastSeq <= before) return;
      known.set(conv, lastSeq);
      this.delivered += lastSeq - before;
      const seqs = this.outstanding.get(conv);
      if (!seqs) return;
      for (let seq = before + 1; seq <= lastSeq; seq++) {
        const o = seqs.get(seq);
        if (!o) continue;
        o.remaining -= 1;
        if (o.remaining <= 0) {
          seqs.delete(seq);
          this.done();
        }
      }
    };
  }

  /** Gives up on messages older than `ms` (a dropped push must not stall the driver). */
  expire(ms: number): void {
    const cutoff = performance.now() - ms;
    for (const seqs of this.outstanding.values()) {
      for (const [seq, o] of seqs) {
        if (o.sentAt >= cutoff) continue;
        seqs.delete(seq);
        this.lost += 1;
        this.done();
      }
    }
  }

  /** Resolves at the next completion, or after `ms`. */
  next(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  private done(): void {
    this.pending -= 1;
    this.wake?.();
  }
}
