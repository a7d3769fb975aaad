import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { shutdownBoundMs } from '../../server/app.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { DROPPED, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: SIGTERM under load, and under load while Redis is stuck. Every request the server
 * accepted is answered (200, or 503 with its outcome) before it exits 0; none is accepted and
 * then dropped. A new process on the same port takes over and nothing acknowledged is lost.
 */
const STORE_TIMEOUT_MS = 1_000;

describe('chaos: SIGTERM', () => {
  const chaos = chaosFixture();

  async function scenario(name: string, tag: string, stuck: boolean): Promise<void> {
    const {
      server: first,
      env,
      url,
      convs,
      load,
    } = await chaos.takeoverSetup({ tag, count: 24, workers: 8, env: { STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS) } });
    const admin = new Redis(chaos.redis().url);
    try {
      load.start();
      await load.ackedAtLeast(300);
      if (stuck) {
        await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
        // The workers' requests are now waiting on a Redis that does not answer.
        await load.failuresAtLeast(8);
      }
      const signalled = Date.now();
      first.proc.kill('SIGTERM');
      const exit = await first.exited;
      const shutdownMs = Date.now() - signalled;
      if (stuck) await admin.call('CLIENT', 'UNPAUSE');
      await chaos.spawn(env);
      await load.ackedAtLeast(load.ackedSoFar + 300);
      await load.stop();
      const missing = await missingAcked(url, load, convs);
      const unmodelled = await modelMismatches(url, load, convs);
      const f = load.figures();
      const dropped = DROPPED.reduce((n, s) => n + (f.byStatus[s] ?? 0), 0);
      printFigures(name, { ...f, missing: missing.length, unmodelled: unmodelled.length, dropped, exit, shutdownMs });
      expect(exit).toEqual({ code: 0, signal: null });
      expect(shutdownMs).toBeLessThan(shutdownBoundMs(STORE_TIMEOUT_MS));
      expect(first.lines().find((l) => l.event === 'shutdown_done')).toBeDefined();
      expect(dropped, 'requests accepted and then dropped').toBe(0);
      expect(missing).toEqual([]);
      expect(unmodelled, 'unread, mentions and totals after the fault equal the model').toEqual([]);
      const failures = Object.keys(f.byStatus).filter((s) => s !== '200');
      // 503s from the draining server, then refused connections until the new one listens.
      expect(
        failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown' || s === 'ECONNREFUSED'),
        `failures: ${failures.join(', ')}`,
      ).toBe(true);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      admin.disconnect();
    }
  }

  it(
    'under load: every accepted request answered, exit 0, nothing acknowledged lost',
    async () => {
      await scenario('SIGTERM under load', 's', false);
    },
    CHAOS_TEST_MS,
  );

  it(
    'under load while Redis is stuck: every accepted request answered (503 with its outcome), exit 0',
    async () => {
      await scenario('SIGTERM under load, Redis stuck', 't', true);
    },
    CHAOS_TEST_MS,
  );
});
