import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { shutdownBoundMs } from '../../server/app.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { conversations, createConversations, DROPPED, IngestLoad, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: SIGTERM under load, and under load while Redis is stuck. Every request the server
 * accepted is answered (200, or 503 with its outcome) before it exits 0; none is accepted and
 * then dropped. A new process on the same port takes over and nothing acknowledged is lost.
 */
const STORE_TIMEOUT_MS = 1_000;
const SIGNAL_AFTER_ACKS = [300, 20] as const;
/** How long after a process exited the test may learn that its last connections are gone. */
const EXIT_SEEN_MS = 1_000;

describe('chaos: SIGTERM', () => {
  const chaos = chaosFixture();

  /**
   * At two fault timings, as server-kill.test.ts: well into the load, and right after it started
   * (the process that took over from the first signal is the one signalled the second time).
   */
  async function scenario(name: string, tag: string, stuck: boolean): Promise<void> {
    const setup = await chaos.takeoverSetup({ tag, count: 24, workers: 8, env: { STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS) } });
    const { env, url } = setup;
    let first = setup.server;
    const admin = new Redis(chaos.redis().url);
    try {
      for (const [t, afterAcks] of SIGNAL_AFTER_ACKS.entries()) {
        const timing = `${name}, signalled after ${afterAcks} acks`;
        const convs = t === 0 ? setup.convs : conversations(24, `${tag}${t}x`);
        if (t > 0) await createConversations(url, convs);
        const load = t === 0 ? setup.load : new IngestLoad(() => url, convs, 8);
        load.start();
        await load.ackedAtLeast(afterAcks);
        if (stuck) {
          await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
          // The workers' requests are now waiting on a Redis that does not answer.
          await load.failuresAtLeast(8);
        }
        // The signal must find requests in flight, or it tests only a stop between requests. The
        // workers back off after a failure (Redis stuck): wait until one is in flight again.
        const waitUntil = Date.now() + 10_000;
        while (load.inFlight === 0 && Date.now() < waitUntil) await new Promise((resolve) => setTimeout(resolve, 5));
        const inFlightAtSignal = load.inFlight;
        expect(inFlightAtSignal, `${timing}: requests in flight at the signal`).toBeGreaterThan(0);
        const signalled = Date.now();
        first.proc.kill('SIGTERM');
        const exit = await first.exited;
        const shutdownMs = Date.now() - signalled;
        if (stuck) await admin.call('CLIENT', 'UNPAUSE');
        const next = await chaos.spawn(env);
        await load.ackedAtLeast(load.ackedSoFar + 300);
        await load.stop();
        const missing = await missingAcked(url, load, convs);
        const unmodelled = await modelMismatches(url, load, convs);
        const f = load.figures();
        // A request written into an idle keep-alive connection at the instant the server closes it
        // fails with a connection error, unread (HTTP/1.1's own race, PROTOCOL.md "Shutdown"):
        // that is so only if the server had answered every request it read when it began closing
        // them, and the error came between that instant and the exit. Any other connection error
        // is a request accepted and then dropped.
        const closing = first.lines().find((l) => l.event === 'http_connections_closing');
        const closingAt = typeof closing?.time === 'number' ? closing.time : Number.POSITIVE_INFINITY;
        const exitedAt = signalled + shutdownMs;
        const unreadAtClose = load.connectionErrors.filter((e) => e.at >= closingAt && e.at <= exitedAt + EXIT_SEEN_MS).length;
        const dropped = DROPPED.reduce((n, s) => n + (f.byStatus[s] ?? 0), 0) - unreadAtClose;
        printFigures(timing, {
          ...f,
          missing: missing.length,
          unmodelled: unmodelled.length,
          dropped,
          unreadAtClose,
          unansweredAtClose: closing?.unanswered,
          inFlightAtSignal,
          exit,
          shutdownMs,
        });
        expect(closing?.unanswered, `${timing}: requests read and not answered as the connections closed`).toBe(0);
        // One per worker at most: each has one request out at a time.
        expect(unreadAtClose, `${timing}: requests caught in a closing connection`).toBeLessThanOrEqual(load.workerCount);
        expect(exit, timing).toEqual({ code: 0, signal: null });
        expect(shutdownMs, timing).toBeLessThan(shutdownBoundMs(STORE_TIMEOUT_MS));
        expect(
          first.lines().find((l) => l.event === 'shutdown_done'),
          timing,
        ).toBeDefined();
        expect(dropped, `${timing}: requests accepted and then dropped`).toBe(0);
        expect(missing, timing).toEqual([]);
        expect(unmodelled, `${timing}: unread, mentions and totals after the fault equal the model`).toEqual([]);
        const failures = Object.keys(f.byStatus).filter((s) => s !== '200');
        // 503s from the draining server, then refused connections until the new one listens.
        expect(
          failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown' || s === 'ECONNREFUSED'),
          `${timing}: failures: ${failures.join(', ')}`,
        ).toBe(true);
        first = next;
      }
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      admin.disconnect();
    }
  }

  it(
    'under load: every accepted request answered, exit 0, nothing acknowledged lost (at each fault timing)',
    async () => {
      await scenario('SIGTERM under load', 's', false);
    },
    CHAOS_TEST_MS,
  );

  it(
    'under load while Redis is stuck: every accepted request answered (503 with its outcome), exit 0 (at each fault timing)',
    async () => {
      await scenario('SIGTERM under load, Redis stuck', 't', true);
    },
    CHAOS_TEST_MS,
  );
});
