import { loadavg } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FloodResult, runFlood, setUpHeavyUser } from '../../bench/lib/heavy-user-flood.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

/**
 * One user in 5,000 conversations (an ~800 KB snapshot) must not slow everyone else down while
 * staying inside every per-call limit: ten sockets (the per-user maximum) pulling snapshots
 * without a cursor, each under WS_FRAMES_PER_SECOND; or the same user hammering `/unread` and
 * `/v1/sync` over HTTP. Another user's `GET /unread` keeps its idle latency (p90 within 5x, or
 * 20 ms; max under 250 ms, more only past load average 4; all 200) and the heavy user is told `rate_limited` with a retry hint.
 * The server is a process of its own (server/main.ts, memory engine), so the load generator's
 * work never shares its event loop.
 */
const CONVERSATIONS = 5000;
let server: ServerProcess;
let users: { heavy: string; bystander: string };

beforeAll(async () => {
  server = await spawnServer({});
  users = await setUpHeavyUser({ port: server.port, apiKey: TEST_API_KEY, jwtSecret: TEST_JWT_SECRET }, 'hv', CONVERSATIONS);
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

function expectFair(r: FloodResult): void {
  const summary = JSON.stringify({ idle: r.idle, loaded: r.loaded, heavy: r.heavy, snapshotBytes: r.snapshotBytes });
  expect(r.snapshotBytes, summary).toBeGreaterThan(500_000);
  expect(r.loaded.count, summary).toBeGreaterThan(50);
  expect(r.loaded.failed, summary).toBe(0);
  expect(r.loaded.p90, summary).toBeLessThanOrEqual(Math.max(5 * r.idle.p90, 20));
  // One outlier is the scheduler as much as the server: 250 ms holds up to load average 4 (two
  // cores, a second suite alongside); past that the allowance grows with the measured load.
  const load = loadavg()[0] ?? 0;
  const maxAllowed = 250 * Math.max(1, load / 4);
  console.log(
    `heavy user: bystander max ${r.loaded.max.toFixed(1)} ms (allowed ${maxAllowed.toFixed(0)} ms at load ${load.toFixed(1)}), p90 ${r.loaded.p90.toFixed(1)} ms vs idle ${r.idle.p90.toFixed(1)} ms`,
  );
  expect(r.loaded.max, summary).toBeLessThan(maxAllowed);
  expect(r.heavy.rateLimited, summary).toBeGreaterThan(0);
  expect(r.heavy.withRetryHint, summary).toBe(r.heavy.rateLimited);
  // Limited, not locked out: the heavy user is still served now and then.
  expect(r.heavy.served, summary).toBeGreaterThan(0);
}

describe('a heavy user cannot slow everyone else down', () => {
  it('10 sockets pulling 5,000-conversation snapshots under the frame limit', async () => {
    const r = await runFlood(
      { port: server.port, apiKey: TEST_API_KEY, jwtSecret: TEST_JWT_SECRET },
      { conversations: CONVERSATIONS, sockets: 10, perSecond: 10, seconds: 8, transport: 'ws', prefix: 'hv' },
      users,
    );
    expectFair(r);
    // Refused, never disconnected: each socket stayed under the frame limit.
    expect(r.heavy.closes).toEqual({});
  }, 60_000);

  it('the same over HTTP: /unread and /v1/sync from 10 loops', async () => {
    const r = await runFlood(
      { port: server.port, apiKey: TEST_API_KEY, jwtSecret: TEST_JWT_SECRET },
      { conversations: CONVERSATIONS, sockets: 10, perSecond: 10, seconds: 8, transport: 'http', prefix: 'hv' },
      users,
    );
    expectFair(r);
  }, 60_000);
});
