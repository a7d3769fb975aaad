import { LatencyHistogram, type LatencySummary } from './histogram.js';

/**
 * Figures per time window (a second, ten seconds) from a start time: counts and latency
 * histograms, so a run can show whether anything spikes periodically rather than one average.
 */
export class Windows {
  private readonly counts = new Map<string, number[]>();
  private readonly histograms = new Map<string, LatencyHistogram[]>();

  constructor(
    /** performance.now() of the first window's start. */
    readonly start: number,
    readonly windowMs: number,
  ) {}

  /** The window `at` (performance.now()) falls in; negative before the start. */
  index(at: number): number {
    return Math.floor((at - this.start) / this.windowMs);
  }

  count(series: string, at = performance.now(), n = 1): void {
    const i = this.index(at);
    if (i < 0) return;
    let list = this.counts.get(series);
    if (!list) this.counts.set(series, (list = []));
    list[i] = (list[i] ?? 0) + n;
  }

  record(series: string, ms: number, at = performance.now()): void {
    const i = this.index(at);
    if (i < 0) return;
    let list = this.histograms.get(series);
    if (!list) this.histograms.set(series, (list = []));
    (list[i] ??= new LatencyHistogram()).recordMs(ms);
  }

  /**
   * Records this process's own event-loop stalls (a `tickMs` timer's lateness) as series
   * `stall` until the returned function is called: a latency spike in a window with a stall as
   * large is the load generator's, not the server's.
   */
  watchStalls(tickMs = 10): () => void {
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      this.record('stall', Math.max(0, now - last - tickMs), now);
      last = now;
    }, tickMs);
    return () => clearInterval(timer);
  }

  /** Counts of the first `n` windows (0 where nothing happened). */
  counted(series: string, n: number): number[] {
    const list = this.counts.get(series) ?? [];
    return Array.from({ length: n }, (_, i) => list[i] ?? 0);
  }

  latencies(series: string, n: number): LatencySummary[] {
    const list = this.histograms.get(series) ?? [];
    return Array.from({ length: n }, (_, i) => (list[i] ?? new LatencyHistogram()).summary());
  }
}

export function median(xs: readonly number[]): number {
  const ok = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (ok.length === 0) return NaN;
  const mid = Math.floor(ok.length / 2);
  return ok.length % 2 === 1 ? (ok[mid] as number) : ((ok[mid - 1] as number) + (ok[mid] as number)) / 2;
}

export function mean(xs: readonly number[]): number {
  const ok = xs.filter(Number.isFinite);
  return ok.length > 0 ? ok.reduce((a, b) => a + b, 0) / ok.length : NaN;
}

/**
 * Of the windows whose p99 is above `factor` × the median window's, how many had a load-generator
 * stall of at least half that p99 (the spike is then the generator's own, not the server's).
 */
export function spikesFromStalls(p99s: readonly number[], stalls: readonly number[], factor = 2): { spikes: number; explained: number } {
  const m = median(p99s);
  let spikes = 0;
  let explained = 0;
  p99s.forEach((p, i) => {
    if (!(p > factor * m)) return;
    spikes += 1;
    if ((stalls[i] ?? 0) >= p / 2) explained += 1;
  });
  return { spikes, explained };
}

export function spikeNote(what: string, s: { spikes: number; explained: number }): string | undefined {
  if (s.spikes === 0) return undefined;
  const spikes = `${what}: ${s.spikes} window(s) with a p99 above twice the median`;
  if (s.explained === 0) return `${spikes}; none coincides with a stall of the load generator itself.`;
  return `${spikes}; in ${s.explained} of them the load generator itself stalled for at least half that p99 (the stall column): ${s.explained === s.spikes ? 'those spikes are' : 'those are'} this machine's, not the server's.`;
}
