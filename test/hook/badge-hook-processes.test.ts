import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeEvent } from '../../server/hook/badge-event.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

/**
 * Real server processes (server/main.ts, configured by BADGE_HOOK_* variables) on one Redis: two
 * drainers never deliver a user at once; a drainer killed with SIGKILL while its requests hang
 * (so it holds claims) loses no final badge: its claims expire and a process started after it
 * delivers.
 */
const SECRET = 'processes-badge-secret-0123456789abcdef';
const USERS = Array.from({ length: 10 }, (_, i) => `p${i}`);

describe('badge hook, two server processes on one Redis', () => {
  let redis: RedisServer;
  let receiver: BadgeReceiver;
  let servers: ServerProcess[] = [];
  let env: Record<string, string>;

  const call = async (server: ServerProcess, method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    expect(res.status, `${method} ${path}`).toBe(200);
    return res.json();
  };
  const total = async (server: ServerProcess, uid: string): Promise<number> =>
    ((await call(server, 'GET', `/v1/users/${uid}/unread`)) as { total: number }).total;

  beforeAll(async () => {
    redis = await startRedisServer();
    receiver = new BadgeReceiver(SECRET);
    await receiver.start();
    receiver.mode = { delayMs: 40 };
    env = {
      REDIS_URL: redis.url,
      HOST: '127.0.0.1',
      BADGE_HOOK_URL: receiver.url,
      BADGE_HOOK_SECRET: SECRET,
      BADGE_HOOK_INTERVAL_MS: '100',
      // A short lease (1 × (3 s + 5 s) + 2 × 10 ms): a killed process's claims expire soon.
      BADGE_HOOK_ATTEMPTS: '1',
      BADGE_HOOK_TIMEOUT_MS: '3000',
      BADGE_HOOK_RETRY_MS: '10',
      BADGE_HOOK_PARK_MS: '300',
      BADGE_HOOK_CONCURRENCY: '4',
    };
    servers = await Promise.all([spawnServer(env), spawnServer(env)]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(servers.map((s) => (s.proc.exitCode === null && s.proc.signalCode === null ? s.stop() : undefined)));
    await receiver?.stop();
    await redis?.stop();
  });

  it('delivers each user from one process at a time; a killed process’s claims expire and the other delivers the final badges', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    await call(a, 'PUT', '/v1/conversations/hall/members', { add: [...USERS, 'boss'] });
    for (let seq = 1; seq <= 20; seq++) await call(seq % 2 ? a : b, 'POST', '/v1/messages', { conv: 'hall', seq, sender: 'boss' });
    await vi.waitFor(
      async () => {
        for (const uid of USERS) expect(receiver.latest(uid)?.badge.total, uid).toBe(20);
      },
      { timeout: 30_000, interval: 100 },
    );
    // Two drainers ran together: never one user at once.
    expect(receiver.overlaps).toBe(0);
    // The push service hangs (each request outlives its 3 s timeout); more changes; both
    // processes go: the second stopped, the first killed the moment a request of its arrives,
    // so while it holds that user's claim.
    receiver.mode = { delayMs: 20_000 };
    for (let seq = 21; seq <= 25; seq++) await call(b, 'POST', '/v1/messages', { conv: 'hall', seq, sender: 'boss' });
    await call(b, 'POST', '/v1/users/p1/read', { conv: 'hall', seq: 25 });
    await b.stop();
    const arrived = receiver.requests.length;
    await vi.waitFor(() => expect(receiver.requests.length).toBeGreaterThan(arrived), { timeout: 20_000, interval: 2 });
    a.proc.kill('SIGKILL');
    await a.exited;
    receiver.mode = { delayMs: 20 };
    // A new process: it can deliver the killed one's users only once their claims expire.
    const c = await spawnServer(env);
    servers.push(c);
    await vi.waitFor(
      async () => {
        // By seq: a request the killed process left hanging may still land after newer ones.
        for (const uid of USERS) expect(receiver.latest(uid)?.badge.total, uid).toBe(await total(c, uid));
      },
      { timeout: 60_000, interval: 200 },
    );
    expect(receiver.latest('p1')?.badge.total).toBe(0);
    // Overlaps are counted while the two drainers run together (before the stops); the killed
    // one's hanging requests may overlap the new process's deliveries only after its claims expired.
    for (const uid of USERS) {
      const seqs = receiver.of(uid).map((e: BadgeEvent) => e.seq);
      expect(new Set(seqs).size, uid).toBe(seqs.length);
    }
  }, 180_000);
});
