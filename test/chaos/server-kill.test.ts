import { describe, expect, it } from 'vitest';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { DROPPED, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: the server process is killed (-9) under ingest and started again on the same port and
 * Redis (AOF `always`). Every message it acknowledged before dying is in the store afterwards.
 */
describe('chaos: kill -9 of the server under ingest', () => {
  const chaos = chaosFixture();

  it(
    'every acknowledged message is present after the restart',
    async () => {
      const { server: first, env, url, convs, load } = await chaos.takeoverSetup({ tag: 'k', count: 24, workers: 8, env: { STORE_TIMEOUT_MS: '1000' } });
      load.start();
      await load.ackedAtLeast(400);
      // The kill must strike requests in flight, or it tests only a restart between requests.
      const inFlightAtKill = load.inFlight;
      expect(inFlightAtKill, 'requests in flight when the server was killed').toBeGreaterThan(0);
      const killedAt = Date.now();
      first.proc.kill('SIGKILL');
      await first.exited;
      await chaos.spawn(env);
      const upAfterMs = Date.now() - killedAt;
      const ackedBefore = load.ackedSoFar;
      await load.ackedAtLeast(ackedBefore + 400);
      await load.stop();
      const missing = await missingAcked(url, load, convs);
      const unmodelled = await modelMismatches(url, load, convs);
      const f = load.figures();
      const dropped = DROPPED.reduce((n, s) => n + (f.byStatus[s] ?? 0), 0);
      printFigures('server kill -9', {
        ...f,
        missing: missing.length,
        unmodelled: unmodelled.length,
        inFlightAtKill,
        dropped,
        ackedAtKill: ackedBefore,
        serverBackAfterMs: upAfterMs,
      });
      expect(missing).toEqual([]);
      // The requests the kill dropped were retried to completion: every count is the model's.
      expect(unmodelled, 'unread, mentions and totals after the fault equal the model').toEqual([]);
    },
    CHAOS_TEST_MS,
  );
});
