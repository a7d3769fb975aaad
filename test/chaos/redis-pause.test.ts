import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { expectWithin } from '../helpers/bound.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { conversations, createConversations, expectExactAfterFault, IngestLoad, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: Redis stops answering (CLIENT PAUSE ... WRITE: every script waits) under ingest. Each
 * request is answered within the store timeout, 503 with what is known; once Redis answers
 * again ingest recovers and nothing acknowledged is lost.
 */
const STORE_TIMEOUT_MS = 1_000;

/**
 * The fault at several timings, on one server process: mid-load until requests fail (longer
 * than the store timeout), and early in the load for less than it (requests in hand wait it out).
 */
const TIMINGS = [
  { name: 'after 300 acks, until 16 failures', afterAcks: 300, pauseMs: 0, failuresAtLeast: 16 },
  { name: 'after 20 acks, paused 0.4 s', afterAcks: 20, pauseMs: 400, failuresAtLeast: 0 },
] as const;

describe('chaos: Redis stuck (CLIENT PAUSE)', () => {
  const chaos = chaosFixture();

  it(
    'bounded 503s while it is stuck, then recovery; every acknowledged message present (at each fault timing)',
    async () => {
      const server = await chaos.spawn({ STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS) });
      const admin = new Redis(chaos.redis().url);
      try {
        for (const [t, timing] of TIMINGS.entries()) {
          const convs = conversations(24, `p${t}`);
          await createConversations(server.url, convs);
          const load = new IngestLoad(() => server.url, convs, 8);
          load.start();
          await load.ackedAtLeast(timing.afterAcks);
          const pausedAt = Date.now();
          await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
          // Stuck long enough for the requests in hand, their retries, and those queued behind them to fail.
          if (timing.failuresAtLeast > 0) await load.failuresAtLeast(timing.failuresAtLeast);
          await delay(Math.max(0, timing.pauseMs - (Date.now() - pausedAt)));
          await admin.call('CLIENT', 'UNPAUSE');
          const unpausedAt = Date.now();
          await load.ackedAtLeast(load.ackedSoFar + 300);
          await load.stop();
          const missing = await missingAcked(server.url, load, convs);
          const unmodelled = await modelMismatches(server.url, load, convs);
          const f = load.figures();
          printFigures(`Redis CLIENT PAUSE, ${timing.name}`, {
            ...f,
            missing: missing.length,
            unmodelled: unmodelled.length,
            pausedMs: unpausedAt - pausedAt,
            firstAckAfterUnpauseMs: (load.recovered ?? Number.NaN) - unpausedAt,
          });
          expectExactAfterFault(timing.name, missing, unmodelled, f.byStatus);
          // Ingest that reached a stuck Redis cannot know whether it landed: it says so.
          if (timing.failuresAtLeast > 0) expect(f.byStatus['503 outcome_unknown'] ?? 0, timing.name).toBeGreaterThan(0);
          // PROTOCOL.md: answered within STORE_TIMEOUT_MS plus 250 ms.
          expectWithin(`${timing.name}: slowest failed request while Redis was stuck`, f.slowestFailureMs, STORE_TIMEOUT_MS + 250);
        }
        const down = server.lines().find((l) => l.event === 'store_down' && String(l.target).startsWith('engine@'));
        expect(String(down?.cause)).toMatch(/no reply within/);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
        admin.disconnect();
      }
    },
    CHAOS_TEST_MS,
  );
});
