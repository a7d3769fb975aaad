import { describe, expect, it } from 'vitest';
import type { ServerProcess } from '../helpers/server-process.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { conversations, createConversations, DROPPED, IngestLoad, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: the server process is killed (-9) under ingest and started again on the same port and
 * Redis (AOF `always`). Every message it acknowledged before dying is in the store afterwards.
 * At two fault timings: well into the load, and right after it started (the process that came
 * back from the first kill is the one killed the second time).
 */
const KILL_AFTER_ACKS = [400, 20] as const;

describe('chaos: kill -9 of the server under ingest', () => {
  const chaos = chaosFixture();

  it(
    'every acknowledged message is present after the restart (at each fault timing)',
    async () => {
      const setup = await chaos.takeoverSetup({ tag: 'k', count: 24, workers: 8, env: { STORE_TIMEOUT_MS: '1000' } });
      const { env, url } = setup;
      let server: ServerProcess = setup.server;
      for (const [t, afterAcks] of KILL_AFTER_ACKS.entries()) {
        const timing = `killed after ${afterAcks} acks`;
        // A tag no earlier conversation name starts with ('k1' would name k10..k19 again).
        const convs = t === 0 ? setup.convs : conversations(24, `k${t}x`);
        if (t > 0) await createConversations(url, convs);
        const load = t === 0 ? setup.load : new IngestLoad(() => url, convs, 8);
        load.start();
        await load.ackedAtLeast(afterAcks);
        // The kill must strike requests in flight, or it tests only a restart between requests.
        const inFlightAtKill = load.inFlight;
        expect(inFlightAtKill, `${timing}: requests in flight when the server was killed`).toBeGreaterThan(0);
        const killedAt = Date.now();
        server.proc.kill('SIGKILL');
        await server.exited;
        server = await chaos.spawn(env);
        const upAfterMs = Date.now() - killedAt;
        const ackedBefore = load.ackedSoFar;
        await load.ackedAtLeast(ackedBefore + 400);
        await load.stop();
        const missing = await missingAcked(url, load, convs);
        const unmodelled = await modelMismatches(url, load, convs);
        const f = load.figures();
        const dropped = DROPPED.reduce((n, s) => n + (f.byStatus[s] ?? 0), 0);
        printFigures(`server kill -9, ${timing}`, {
          ...f,
          missing: missing.length,
          unmodelled: unmodelled.length,
          inFlightAtKill,
          dropped,
          ackedAtKill: ackedBefore,
          serverBackAfterMs: upAfterMs,
        });
        expect(missing, timing).toEqual([]);
        // The requests the kill dropped were retried to completion: every count is the model's.
        expect(unmodelled, `${timing}: unread, mentions and totals after the fault equal the model`).toEqual([]);
      }
    },
    CHAOS_TEST_MS,
  );
});
