import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { expectWithin } from '../helpers/bound.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { conversations, createConversations, IngestLoad, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: Redis stops answering (CLIENT PAUSE ... WRITE: every script waits) under ingest. Each
 * request is answered within the store timeout, 503 with what is known; once Redis answers
 * again ingest recovers and nothing acknowledged is lost.
 */
const STORE_TIMEOUT_MS = 1_000;

describe('chaos: Redis stuck (CLIENT PAUSE)', () => {
  const chaos = chaosFixture();

  it(
    'bounded 503s while it is stuck, then recovery; every acknowledged message present',
    async () => {
      const server = await chaos.spawn({ STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS) });
      const convs = conversations(24, 'p');
      await createConversations(server.url, convs);
      const load = new IngestLoad(() => server.url, convs, 8);
      const admin = new Redis(chaos.redis().url);
      try {
        load.start();
        await load.ackedAtLeast(300);
        const pausedAt = Date.now();
        await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
        // Stuck long enough for the requests in hand, their retries, and those queued behind them to fail.
        await load.failuresAtLeast(16);
        await admin.call('CLIENT', 'UNPAUSE');
        const unpausedAt = Date.now();
        await load.ackedAtLeast(load.ackedSoFar + 300);
        await load.stop();
        const missing = await missingAcked(server.url, load, convs);
        const unmodelled = await modelMismatches(server.url, load, convs);
        const down = server.lines().find((l) => l.event === 'store_down' && String(l.target).startsWith('engine@'));
        const f = load.figures();
        printFigures('Redis CLIENT PAUSE', {
          ...f,
          missing: missing.length,
          unmodelled: unmodelled.length,
          pausedMs: unpausedAt - pausedAt,
          firstAckAfterUnpauseMs: (load.recovered ?? Number.NaN) - unpausedAt,
          serverSaw: down?.cause,
        });
        expect(missing).toEqual([]);
        expect(unmodelled, 'unread, mentions and totals after the fault equal the model').toEqual([]);
        const failures = Object.keys(f.byStatus).filter((s) => s !== '200');
        expect(
          failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown'),
          `failures: ${failures.join(', ')}`,
        ).toBe(true);
        // Ingest that reached a stuck Redis cannot know whether it landed: it says so.
        expect(f.byStatus['503 outcome_unknown'] ?? 0).toBeGreaterThan(0);
        // PROTOCOL.md: answered within STORE_TIMEOUT_MS plus 250 ms.
        expectWithin('slowest failed request while Redis was stuck', f.slowestFailureMs, STORE_TIMEOUT_MS + 250);
        expect(String(down?.cause)).toMatch(/no reply within/);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
        admin.disconnect();
      }
    },
    CHAOS_TEST_MS,
  );
});
