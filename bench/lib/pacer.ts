import { setTimeout as delay } from 'node:timers/promises';
import type { FailureReasons } from './failures.js';

export interface PaceOptions {
  /** Operations per second. */
  rate: number;
  /** Operations in total (the loop's count bound). */
  total: number;
  /** At most this many unfinished operations; the pacer falls behind rather than pile up more. */
  maxInFlight: number;
  /** Hard stop: no new operation starts after this many ms (the loop's time bound). */
  deadlineMs: number;
  /** Starts operation `i` (0-based); resolves true on success. */
  start(i: number): Promise<boolean>;
  /**
   * Where to count why operations failed: a rejection's error, and those still unfinished when
   * the settle timeout ends. (`start` adds its own reason when it resolves false.)
   */
  failures?: FailureReasons;
}

export interface PaceResult {
  started: number;
  ok: number;
  failed: number;
  /** performance.now() of the last completion. */
  lastDoneAt: number;
  /** How far the pacer fell behind schedule at worst (ms): > a few ms means the target was not held. */
  maxLagMs: number;
}

const TICK_MS = 1;
const SETTLE_TIMEOUT_MS = 15_000;

/**
 * Open-loop, bounded-rate load: operation i is due at i/rate seconds, whatever the server's
 * speed (a closed loop would slow down with the server and hide its latency).
 */
export async function pace(options: PaceOptions): Promise<PaceResult> {
  const { rate, total, maxInFlight } = options;
  const t0 = performance.now();
  let started = 0;
  let ok = 0;
  let failed = 0;
  let inFlight = 0;
  let maxLagMs = 0;
  let lastDone = t0;
  const finish = (success: boolean): void => {
    inFlight -= 1;
    if (success) ok += 1;
    else failed += 1;
    lastDone = performance.now();
  };
  while (started < total) {
    const now = performance.now();
    if (now - t0 > options.deadlineMs) break;
    const due = Math.min(total, Math.floor(((now - t0) * rate) / 1000) + 1);
    while (started < due && inFlight < maxInFlight) {
      maxLagMs = Math.max(maxLagMs, now - t0 - (started * 1000) / rate);
      inFlight += 1;
      options.start(started++).then(finish, (err: unknown) => {
        options.failures?.error(err);
        finish(false);
      });
    }
    await delay(TICK_MS);
  }
  const settleBy = performance.now() + SETTLE_TIMEOUT_MS;
  while (inFlight > 0 && performance.now() < settleBy) await delay(TICK_MS);
  failed += inFlight;
  options.failures?.add(`still in flight when the ${SETTLE_TIMEOUT_MS / 1000} s settle timeout ended`, inFlight);
  return { started, ok, failed, lastDoneAt: lastDone, maxLagMs };
}
