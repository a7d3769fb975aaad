import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { expectWithin } from '../helpers/bound.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';
import { WsClient } from '../helpers/ws-client.js';
import { waitMatchesServer } from '../helpers/ws-expect.js';
import { CHAOS_TEST_MS, chaosFixture } from './fixture.js';
import { conversations, createConversations, expectExactAfterFault, IngestLoad, missingAcked, modelMismatches, printFigures } from './ingest-load.js';

/**
 * Chaos: Redis is killed (SIGKILL) under ingest and comes back from its AOF (`always`). While it
 * is down every request is answered 503 within the store timeout; once it is back readiness
 * recovers, ingest goes on, every acknowledged message is present, and WebSocket clients converge.
 */
const STORE_TIMEOUT_MS = 1_000;

/**
 * The fault at several timings, on one server process (a process per timing would cost its start
 * each time): mid-load for longer than the store timeout (requests during the outage fail at
 * once), and early in the load for less than it (requests in hand may ride it out).
 */
const TIMINGS = [
  { name: 'after 300 acks, down 2.5 s', afterAcks: 300, downMs: 2_500, failuresAtLeast: 20 },
  { name: 'after 20 acks, down 0.4 s', afterAcks: 20, downMs: 400, failuresAtLeast: 0 },
] as const;

describe('chaos: Redis SIGKILL and restart from AOF', () => {
  const chaos = chaosFixture();
  const clients: WsClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });

  it(
    'acknowledged messages survive, readiness recovers, clients converge; failures are bounded 503s (at each fault timing)',
    async () => {
      const redis = chaos.redis();
      const server = await chaos.spawn({ STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS), WS_VERSION_EVERY_SECONDS: '1' });
      const auth = new Authenticator(TEST_JWT_SECRET, TEST_API_KEY);
      for (const [t, timing] of TIMINGS.entries()) {
        const convs = conversations(24, `r${t}`);
        await createConversations(server.url, convs);
        const watching: WsClient[] = [];
        for (const c of convs.slice(0, 4)) {
          const client = await WsClient.open(`ws://127.0.0.1:${server.port}/v1/ws`, { token: await auth.mintUserToken(c.members[0]) });
          await client.ready();
          clients.push(client);
          watching.push(client);
        }
        const load = new IngestLoad(() => server.url, convs, 8);
        load.start();
        await load.ackedAtLeast(timing.afterAcks);

        const killedAt = Date.now();
        await redis.kill();
        if (timing.failuresAtLeast > 0) await load.failuresAtLeast(timing.failuresAtLeast);
        await delay(Math.max(0, timing.downMs - (Date.now() - killedAt)));
        const restartedAt = Date.now();
        await redis.restart();
        const redisUpAfterMs = Date.now() - killedAt;
        // Bounded by its own deadline, so a server that never recovers fails with a reason.
        const readyBy = Date.now() + 30_000;
        for (;;) {
          const res = await fetch(`${server.url}/readyz`).catch(() => undefined);
          if (res?.status === 200) break;
          if (Date.now() > readyBy) throw new Error(`${timing.name}: not ready 30 s after the Redis restart:\n${server.output()}`);
          await delay(20);
        }
        const readyAfterRestartMs = Date.now() - restartedAt;
        await load.ackedAtLeast(load.ackedSoFar + 300);
        await load.stop();

        const missing = await missingAcked(server.url, load, convs);
        const unmodelled = await modelMismatches(server.url, load, convs);
        const unread = async (uid: string): Promise<UnreadSummary> => {
          const res = await fetch(`${server.url}/v1/users/${uid}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
          return (await res.json()) as UnreadSummary;
        };
        const convergeStarted = Date.now();
        for (const client of watching) await waitMatchesServer(client, { unread }, 15_000, `${timing.name}: after the Redis restart`);
        const f = load.figures();
        printFigures(`Redis SIGKILL + AOF restart, ${timing.name}`, {
          ...f,
          missing: missing.length,
          unmodelled: unmodelled.length,
          redisDownMs: redisUpAfterMs,
          readyAfterRestartMs,
          firstAckAfterRestartMs: (load.recovered ?? Number.NaN) - restartedAt,
          clientsConvergedMs: Date.now() - convergeStarted,
        });
        expectExactAfterFault(timing.name, missing, unmodelled, f.byStatus);
        // PROTOCOL.md: answered within STORE_TIMEOUT_MS plus 250 ms.
        expectWithin(`${timing.name}: slowest failed request while Redis was down`, f.slowestFailureMs, STORE_TIMEOUT_MS + 250);
      }
      const up = server.lines().filter((l) => l.event === 'store_up' && String(l.target).startsWith('engine@'));
      expect(up.length, 'the server saw the store come back').toBeGreaterThanOrEqual(1);
    },
    CHAOS_TEST_MS,
  );
});
