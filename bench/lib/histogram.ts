import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** Percentiles in milliseconds (recorded in microseconds, so sub-ms latencies keep their detail). */
export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * A latency histogram on node:perf_hooks (HDR-style, the same percentiles as hdr-histogram-js).
 * Values are taken in milliseconds and stored as integer microseconds.
 */
export class LatencyHistogram {
  private readonly h: RecordableHistogram = createHistogram({ lowest: 1, highest: 120_000_000, figures: 3 });

  recordMs(ms: number): void {
    this.h.record(Math.max(1, Math.round(ms * 1000)));
  }

  get count(): number {
    return this.h.count;
  }

  summary(): LatencySummary {
    if (this.h.count === 0) return { count: 0, p50: NaN, p95: NaN, p99: NaN, max: NaN, mean: NaN };
    const ms = (us: number): number => us / 1000;
    return {
      count: this.h.count,
      p50: ms(this.h.percentile(50)),
      p95: ms(this.h.percentile(95)),
      p99: ms(this.h.percentile(99)),
      max: ms(this.h.max),
      mean: ms(this.h.mean),
    };
  }
}
