import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeEvent } from '../../server/hook/badge-event.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

/**
 * Two servers on one Redis (same key prefix), each with its own drainer and connection, draining
 * the same marks: a user is delivered by one drainer at a time (the receiver sees no overlapping
 * requests for a user, and each user's sequences rise in arrival order), and every user's last
 * event equals GET /unread.
 */
const SECRET = 'two-servers-badge-secret-0123456789abcdef';
const USERS = Array.from({ length: 12 }, (_, i) => `u${i}`);

describe('badge hook, two servers on one Redis', () => {
  let redis: RedisServer;
  let receiver: BadgeReceiver;
  let servers: TestServer[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    receiver = new BadgeReceiver(SECRET);
    await receiver.start();
    receiver.mode = { delayMs: 60 };
    const badgeHook = {
      webhook: { url: receiver.url, secret: SECRET, timeoutMs: 5_000 },
      intervalMs: 100,
      attempts: 4,
      retryMs: 50,
      parkMs: 500,
      concurrency: 4,
      socketlessOnly: false,
    };
    servers = await Promise.all([0, 1].map(() => startTestServer({ engine: 'redis', redis, redisPrefix: 'two', config: { badgeHook } })));
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await receiver?.stop();
    await redis?.stop();
  });

  it('delivers each user from one drainer at a time, sequences rising, the last event equal to GET /unread', async () => {
    const [a, b] = servers as [TestServer, TestServer];
    await a.members('room', { add: [...USERS, 'sender'] });
    // Messages through both servers, reads through both: every user changes many times.
    for (let seq = 1; seq <= 30; seq++) {
      await (seq % 2 ? a : b).post({ conv: 'room', seq, sender: 'sender' });
      if (seq % 7 === 0) await (seq % 2 ? b : a).api('POST', `/v1/users/${USERS[seq % USERS.length]}/read`, { conv: 'room', seq });
    }
    await vi.waitFor(
      async () => {
        for (const uid of USERS) {
          const u = await a.unread(uid);
          expect(receiver.last(uid)?.badge.total, uid).toBe(u.total);
        }
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(receiver.overlaps).toBe(0);
    for (const uid of USERS) {
      const seqs = receiver.of(uid).map((e: BadgeEvent) => e.seq);
      expect(seqs, uid).toEqual([...seqs].sort((x, y) => x - y));
      expect(new Set(seqs).size, uid).toBe(seqs.length);
    }
  });

  it('a server shut down while its deliveries retry hands them back: the other server delivers the final badge', async () => {
    const [a, b] = servers as [TestServer, TestServer];
    await b.members('late', { add: ['lea', 'max'] });
    await vi.waitFor(() => expect(receiver.last('lea')?.badge.total).toBe(0), { timeout: 10_000, interval: 50 });
    receiver.mode = 'unavailable';
    const refused = receiver.refused;
    for (let seq = 1; seq <= 4; seq++) await b.post({ conv: 'late', seq, sender: 'max' });
    await vi.waitFor(() => expect(receiver.refused).toBeGreaterThan(refused + 1), { timeout: 10_000, interval: 20 });
    // Both drainers may hold some of the retries; one server goes away, the other stays.
    await a.close();
    receiver.mode = { delayMs: 10 };
    const last = await vi.waitFor(
      async () => {
        const total = (await b.unread('lea')).total;
        expect(receiver.last('lea')?.badge.total).toBe(total);
        return total;
      },
      { timeout: 20_000, interval: 50 },
    );
    expect(last).toBe(4);
  });
});
