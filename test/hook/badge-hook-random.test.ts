import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeEvent } from '../../server/hook/badge-event.js';
import { mulberry32 } from '../helpers/prng.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

/**
 * Random traffic — messages with mentions, reads from other devices (forward and repeated),
 * mutes and unmutes, a join to a read-diffused group, messages to it — against a real receiver
 * that is unavailable part of the time: once traffic stops and the receiver answers, every
 * user's last event equals GET /unread (total, mentions, categories), each user's events rise in
 * seq, `previous` is always the badge of the event before it, `change` = badge − previous, and
 * no user was ever delivered twice at once.
 */
const SECRET = 'random-badge-secret-0123456789abcdef0123';
const USERS = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
const CONVS = [
  { conv: 'x1', members: ['r0', 'r1'], category: 'work' },
  { conv: 'x2', members: ['r0', 'r1', 'r2'], category: 'default' },
  { conv: 'x3', members: ['r2', 'r3', 'r4'], category: 'family' },
  { conv: 'big', members: USERS, category: 'default' },
];

describe.each(['memory', 'redis'] as const)('badge hook under random traffic, %s engine', (engine) => {
  let redis: RedisServer | undefined;
  let receiver: BadgeReceiver;
  let s: TestServer;

  beforeAll(async () => {
    receiver = new BadgeReceiver(SECRET);
    await receiver.start();
    if (engine === 'redis') redis = await startRedisServer();
    s = await startTestServer({
      engine,
      ...(redis ? { redis } : {}),
      largeGroupThreshold: 4,
      config: {
        badgeHook: {
          webhook: { url: receiver.url, secret: SECRET, timeoutMs: 2_000 },
          intervalMs: 80,
          attempts: 3,
          retryMs: 30,
          parkMs: 300,
          concurrency: 4,
          socketlessOnly: false,
        },
      },
    });
  });

  afterAll(async () => {
    await s?.close();
    await receiver?.stop();
    await redis?.stop();
  });

  it('ends with every user’s last event equal to GET /unread, a consistent chain of events per user', async () => {
    const random = mulberry32(engine === 'memory' ? 44 : 4403);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
    const heads = new Map<string, number>();
    for (const c of CONVS) await s.members(c.conv, { add: c.members, category: c.category });
    for (let step = 0; step < 250; step++) {
      if (step % 50 === 10) receiver.mode = 'unavailable';
      if (step % 50 === 30) receiver.mode = random() < 0.5 ? 'ok' : { delayMs: 40 };
      const c = pick(CONVS);
      const roll = random();
      if (roll < 0.55) {
        const seq = (heads.get(c.conv) ?? 0) + 1;
        heads.set(c.conv, seq);
        const sender = pick(c.members);
        const mentioned = random() < 0.2 ? [pick(c.members)] : [];
        await s.post({ conv: c.conv, seq, sender, ...(mentioned.length > 0 ? { mentions: mentioned } : {}) });
      } else if (roll < 0.85) {
        // A read on some device: up to the head, or a stale one (changes nothing).
        const head = heads.get(c.conv) ?? 0;
        await s.api('POST', `/v1/users/${pick(c.members)}/read`, { conv: c.conv, seq: Math.floor(random() * (head + 1)) });
      } else {
        await s.api('PUT', `/v1/users/${pick(c.members)}/conversations/${c.conv}`, { muted: random() < 0.5 });
      }
    }
    receiver.mode = 'ok';
    await vi.waitFor(
      async () => {
        for (const uid of USERS) {
          const u = await s.unread(uid);
          const want = { total: u.total, mentions: u.mentions, categories: Object.fromEntries(Object.entries(u.categories).filter(([, n]) => n !== 0)) };
          expect(receiver.last(uid)?.badge, uid).toEqual(want);
        }
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(receiver.overlaps).toBe(0);
    expect(receiver.invalid).toBe(0);
    for (const uid of USERS) {
      const events = receiver.of(uid);
      // A retry whose response was lost may repeat an event (at-least-once): de-duplicate on the key, as a push service does.
      const chain: BadgeEvent[] = events.filter((e, i) => events.findIndex((o) => o.key === e.key) === i);
      for (let i = 0; i < chain.length; i++) {
        const e = chain[i] as BadgeEvent;
        expect(e.change.total, uid).toBe(e.badge.total - (e.previous?.total ?? 0));
        expect(e.change.mentions, uid).toBe(e.badge.mentions - (e.previous?.mentions ?? 0));
        if (i === 0) continue;
        const before = chain[i - 1] as BadgeEvent;
        expect(e.seq, uid).toBeGreaterThan(before.seq);
        expect(e.previous, uid).toEqual(before.badge);
      }
    }
  });
});
