import { monitorEventLoopDelay } from 'node:perf_hooks';
import { beforeEach, expect } from 'vitest';

/**
 * What a machine at load average 4 on 2 cores adds to a wait: event-loop and scheduling stalls of
 * a second and more were seen here (child processes under tsx, Redis, the test itself). For the
 * deadline of a wait that must end with an answer (a request's own timeout), never for a claim.
 */
export const LOADED_SLACK_MS = 3_000;

/**
 * A claim of X ms may take X/2 more (a loaded machine slows every step of it alike) plus a quarter
 * second, plus the longest stall this process's event loop saw in the test up to the check: what the
 * machine itself added, measured instead of guessed. On a quiet machine a 50 ms claim is held to
 * about 325 ms and a 1,250 ms one to 2,125 ms, where a flat slack let each take 3 s more; under
 * load the measured stall widens them (at load average 30 on 2 cores: stalls of 0.2-0.7 s).
 */
const CLAIM_FACTOR = 0.5;
const FIXED_SLACK_MS = 250;

const stalls = monitorEventLoopDelay({ resolution: 10 });
stalls.enable();
// A window per test: a stall while the file set up (a browser starting, a bundle built) widens no claim.
beforeEach(() => stalls.reset());

/** The longest event-loop stall seen since the test began or the last check (ms), and a fresh window from now. */
function stallSinceLastCheck(): number {
  // max is in nanoseconds; it counts the sampling resolution too.
  const ms = Math.max(0, stalls.max / 1e6 - 10);
  stalls.reset();
  return ms;
}

/** The slack a claim of `claimMs` gets, with the stall measured since the last check. */
function slackFor(claimMs: number, stallMs: number): number {
  return CLAIM_FACTOR * claimMs + FIXED_SLACK_MS + stallMs;
}

/** Asserts `ms` within `claimMs` plus its slack (slackFor), and prints the measured figure next to the claim. */
export function expectWithin(what: string, ms: number, claimMs: number): void {
  const stallMs = stallSinceLastCheck();
  const slackMs = slackFor(claimMs, stallMs);
  console.log(`[bound] ${what}: ${Math.round(ms)} ms (claim ${claimMs} ms, allowed ${Math.round(claimMs + slackMs)} ms: ${Math.round(stallMs)} ms stall seen)`);
  expect(ms, `${what}: ${Math.round(ms)} ms, claim ${claimMs} ms + ${Math.round(slackMs)} ms slack (${Math.round(stallMs)} ms stall seen)`).toBeLessThan(
    claimMs + slackMs,
  );
}
