import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { FORCE_AFTER_MS } from '../../server/stop-signals.js';
import { expectWithin } from '../helpers/bound.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';

/**
 * A second stop signal, a while after the first, ends a shutdown that is taking long (Redis
 * stuck): exit 1 at once, logged. The one key press that arrives twice (terminal and npm) does not.
 */
/** Long enough that the graceful path (a store timeout at least) cannot pass the forced exit's bound with slack. */
const STORE_TIMEOUT_MS = 6_000;

describe('chaos: a second stop signal', () => {
  const chaos = chaosFixture();

  async function stuckShutdown(tag: string, second: { signal: NodeJS.Signals; afterMs: number }): Promise<{ exit: unknown; ms: number; events: string[] }> {
    const { server, env, load } = await chaos.takeoverSetup({ tag, count: 8, workers: 4, env: { STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS) } });
    const admin = new Redis(chaos.redis().url);
    try {
      load.start();
      await load.ackedAtLeast(50);
      await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
      await load.failuresAtLeast(1);
      const signalled = Date.now();
      server.proc.kill('SIGINT');
      setTimeout(() => server.proc.kill(second.signal), second.afterMs);
      const exit = await server.exited;
      const ms = Date.now() - signalled;
      await admin.call('CLIENT', 'UNPAUSE');
      // The load's workers retry until acknowledged: a new process on the port lets them finish.
      await chaos.spawn(env);
      await load.ackedAtLeast(load.ackedSoFar + 20);
      await load.stop();
      return { exit, ms, events: server.lines().map((l) => String(l.event)) };
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      admin.disconnect();
    }
  }

  // Each claim at two timings of the second signal: just past the window and well past it;
  // at once and a tenth of the way through it (not later: a loaded machine delays the first
  // signal's handling and the second's timer by different amounts).
  it(
    'SIGINT again after a second: exit 1 now, not after the shutdown bound',
    async () => {
      for (const [i, afterMs] of [FORCE_AFTER_MS + 300, FORCE_AFTER_MS + 2_000].entries()) {
        const r = await stuckShutdown(`f${i}`, { signal: 'SIGINT', afterMs });
        const timing = `second SIGINT after ${afterMs} ms`;
        expect(r.exit, timing).toEqual({ code: 1, signal: null });
        expect(r.events, timing).toContain('shutdown_forced');
        // The graceful path would take a store timeout at least.
        expectWithin(`exit after the ${timing}`, r.ms, afterMs);
        expect(r.ms, timing).toBeLessThan(STORE_TIMEOUT_MS);
      }
    },
    CHAOS_TEST_MS,
  );

  it(
    'the same signal twice within a second is one graceful shutdown: exit 0',
    async () => {
      for (const [i, afterMs] of [5, 100].entries()) {
        const r = await stuckShutdown(`g${i}`, { signal: 'SIGINT', afterMs });
        const timing = `second SIGINT after ${afterMs} ms`;
        expect(r.exit, timing).toEqual({ code: 0, signal: null });
        expect(r.events, timing).not.toContain('shutdown_forced');
        expect(r.events, timing).toContain('shutdown_done');
      }
    },
    CHAOS_TEST_MS,
  );
});
