import { LatencyHistogram } from './histogram.js';

/**
 * Notify latency: from the moment a POST carrying (conv, seq) is sent to the moment each client
 * learns of that seq. A push announcing lastSeq L tells a client about every seq up to L, so a
 * push that merged several messages (group commit) delivers all of them, each with its own
 * latency. Send and receive times come from one process's performance.now(): one clock.
 */
export class LatencyTracker {
  readonly histogram = new LatencyHistogram();
  /** Push frames received (measured or not). */
  pushes = 0;
  /** (client, seq) pairs delivered for measured messages. */
  delivered = 0;
  /** Pushes whose lastSeq was not above what the client already knew (duplicates, reordering). */
  stale = 0;
  lastDeliveryAt = 0;
  /** Called for every measured delivery too (a scenario that keeps its own windows). */
  onDelivery: ((ms: number, sentAt: number) => void) | undefined;
  /** conv → send time by seq; NaN marks a warm-up message (delivered but not measured). */
  private readonly sent = new Map<string, number[]>();

  markSent(conv: string, seq: number, at: number, measured: boolean): void {
    let times = this.sent.get(conv);
    if (!times) {
      times = [];
      this.sent.set(conv, times);
    }
    times[seq] = measured ? at : NaN;
  }

  /** The push handler of one client (each client keeps the highest seq it knows per conv). */
  receiver(): (conv: string, lastSeq: number) => void {
    const known = new Map<string, number>();
    return (conv, lastSeq) => {
      const now = performance.now();
      this.pushes += 1;
      const before = known.get(conv) ?? 0;
      if (lastSeq <= before) {
        this.stale += 1;
        return;
      }
      known.set(conv, lastSeq);
      const times = this.sent.get(conv);
      if (!times) return;
      for (let seq = before + 1; seq <= lastSeq; seq++) {
        const at = times[seq];
        if (at === undefined || Number.isNaN(at)) continue;
        this.histogram.recordMs(now - at);
        this.onDelivery?.(now - at, at);
        this.delivered += 1;
        this.lastDeliveryAt = now;
      }
    };
  }
}
