import type { Timers } from '../../client-demo/sdk/src/index.js';

/** One timer the client armed: its delay and what became of it. */
export interface RecordedTimer {
  ms: number;
  state: 'pending' | 'fired' | 'cleared';
}

/**
 * Real timers that remember every timer asked for (its delay, and whether it fired or was
 * cleared), read from the client: a timing claim is then checked on the delay the client chose,
 * which a loaded machine cannot move, rather than only on a wall-clock window.
 */
export function recordingTimers(): Timers & { delays: number[]; timers: RecordedTimer[]; withDelay(ms: number): RecordedTimer[] } {
  const delays: number[] = [];
  const timers: RecordedTimer[] = [];
  const byHandle = new Map<unknown, RecordedTimer>();
  return {
    delays,
    timers,
    withDelay: (ms) => timers.filter((t) => t.ms === ms),
    setTimeout: (fn, ms) => {
      delays.push(ms);
      const timer: RecordedTimer = { ms, state: 'pending' };
      timers.push(timer);
      const handle = setTimeout(() => {
        timer.state = 'fired';
        byHandle.delete(handle);
        fn();
      }, ms);
      byHandle.set(handle, timer);
      return handle;
    },
    clearTimeout: (handle) => {
      const timer = byHandle.get(handle);
      if (timer?.state === 'pending') timer.state = 'cleared';
      byHandle.delete(handle);
      clearTimeout(handle as NodeJS.Timeout);
    },
  };
}
