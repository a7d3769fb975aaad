import type { Timers } from '../../client-demo/sdk/src/index.js';

/** Real timers that remember every delay asked for (backoff and retry delays, read from the client). */
export function recordingTimers(): Timers & { delays: number[] } {
  const delays: number[] = [];
  return {
    delays,
    setTimeout: (fn, ms) => {
      delays.push(ms);
      return setTimeout(fn, ms);
    },
    clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  };
}
