import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeHookConfig } from '../../server/config.js';
import type { BadgeEvent } from '../../server/hook/badge-event.js';
import { signBody, verifyBadgeRequest } from '../../server/hook/signature.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

const SECRET = 'badge-hook-test-secret-0123456789abcdef';
const INTERVAL_MS = 300;

function hookConfig(url: string, overrides: Partial<BadgeHookConfig> = {}): BadgeHookConfig {
  return {
    webhook: { url, secret: SECRET, timeoutMs: 5_000 },
    intervalMs: INTERVAL_MS,
    attempts: 6,
    retryMs: 100,
    parkMs: 1_000,
    concurrency: 8,
    socketlessOnly: false,
    ...overrides,
  };
}

/** The badge as GET /unread reports it, in the event's shape (zero categories left out, as the event's). */
async function unreadBadge(s: TestServer, uid: string): Promise<BadgeEvent['badge']> {
  const u = await s.unread(uid);
  return { total: u.total, mentions: u.mentions, categories: Object.fromEntries(Object.entries(u.categories).filter(([, n]) => n !== 0)) };
}

/** Waits until the receiver's last event for `uid` carries what GET /unread says now. */
async function settles(s: TestServer, receiver: BadgeReceiver, uid: string, timeout = 15_000): Promise<BadgeEvent> {
  return vi.waitFor(
    async () => {
      const want = await unreadBadge(s, uid);
      const last = receiver.last(uid);
      expect(last?.badge).toEqual(want);
      return last as BadgeEvent;
    },
    { timeout, interval: 50 },
  );
}

function metric(s: TestServer, name: string): Promise<number> {
  return s.server.metrics.registry
    .getSingleMetric(name)
    ?.get()
    .then((m) => m.values.reduce((n, v) => n + v.value, 0)) as Promise<number>;
}

describe.each(['memory', 'redis'] as const)('badge hook on the %s engine, a real HTTP receiver', (engine) => {
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
      config: { badgeHook: hookConfig(receiver.url) },
    });
  });

  afterAll(async () => {
    await s?.close();
    await receiver?.stop();
    await redis?.stop();
  });

  it('delivers every badge change coalesced, the last event equal to GET /unread, sequences rising', async () => {
    await s.members('c1', { add: ['alice', 'bob'] });
    for (let seq = 1; seq <= 30; seq++) await s.post({ conv: 'c1', seq, sender: 'bob', ...(seq % 10 === 0 ? { mentions: ['alice'] } : {}) });
    const last = await settles(s, receiver, 'alice');
    expect(last.badge).toEqual({ total: 30, mentions: 3, categories: { default: 30 } });
    const events = receiver.of('alice');
    // Coalesced: 30 changes, far fewer events (one per interval at most).
    expect(events.length).toBeLessThan(30);
    for (let i = 1; i < events.length; i++) {
      const [before, after] = [events[i - 1] as BadgeEvent, events[i] as BadgeEvent];
      expect(after.seq).toBeGreaterThan(before.seq);
      // Never an older value after a newer one: the total only rises while only messages arrive.
      expect(after.badge.total).toBeGreaterThanOrEqual(before.badge.total);
      expect(after.previous).toEqual(before.badge);
      expect(after.at - before.at).toBeGreaterThanOrEqual(INTERVAL_MS - 50);
    }
    expect(last.key).toBe(`alice:${last.seq}`);
  });

  it('a read on another device yields an event with the lower badge (the drop that clears the lock screen)', async () => {
    await s.members('c2', { add: ['carol', 'dave'] });
    for (let seq = 1; seq <= 5; seq++) await s.post({ conv: 'c2', seq, sender: 'dave' });
    await settles(s, receiver, 'carol');
    expect(receiver.last('carol')?.badge.total).toBe(5);
    // The other device reads (no socket anywhere): the badge drops to 0.
    const read = await s.api('POST', '/v1/users/carol/read', { conv: 'c2', seq: 5 });
    expect(read.status).toBe(200);
    const last = await settles(s, receiver, 'carol');
    expect(last.badge).toEqual({ total: 0, mentions: 0, categories: {} });
    expect(last.previous?.total).toBe(5);
    expect(last.change.total).toBe(-5);
  });

  it("the user's mutedMentions setting moves the delivered badge: a muted conversation's unread mention counts on true, not on false", async () => {
    await s.members('mm', { add: ['mira', 'milo'] });
    await s.post({ conv: 'mm', seq: 1, sender: 'milo', mentions: ['mira'] });
    expect((await settles(s, receiver, 'mira')).badge.total).toBe(1);
    await s.ok('PUT', '/v1/users/mira/conversations/mm', { level: 'none' });
    expect((await settles(s, receiver, 'mira')).badge.total).toBe(0);
    // The setting changes no conversation: only its own mark brings the hook to deliver.
    await s.ok('PUT', '/v1/users/mira/settings', { mutedMentions: true });
    const on = await settles(s, receiver, 'mira');
    expect(on.badge).toEqual({ total: 1, mentions: 1, categories: { default: 1 } });
    expect(on.previous?.total).toBe(0);
    await s.ok('PUT', '/v1/users/mira/settings', { mutedMentions: false });
    const off = await settles(s, receiver, 'mira');
    expect(off.badge).toEqual({ total: 0, mentions: 0, categories: {} });
    expect(off.previous?.total).toBe(1);
  });

  it('a read-diffused group changes its members’ badges: marked per conversation, expanded at drain time', async () => {
    const members = ['g1', 'g2', 'g3', 'g4', 'g5', 'g6'];
    const info = await s.members('big', { add: members });
    expect(info.large).toBe(true);
    for (let seq = 1; seq <= 4; seq++) await s.post({ conv: 'big', seq, sender: 'g1' });
    for (const uid of ['g2', 'g5', 'g6']) {
      const last = await settles(s, receiver, uid);
      expect(last.badge.total).toBe(4);
    }
  });

  it('a receiver down (503, then refusing connections) for a while loses no final value', async () => {
    await s.members('c3', { add: ['erin', 'frank'] });
    receiver.mode = 'unavailable';
    const refusedBefore = receiver.refused;
    for (let seq = 1; seq <= 3; seq++) await s.post({ conv: 'c3', seq, sender: 'frank' });
    await vi.waitFor(() => expect(receiver.refused).toBeGreaterThan(refusedBefore), { timeout: 10_000 });
    await receiver.stop();
    for (let seq = 4; seq <= 8; seq++) await s.post({ conv: 'c3', seq, sender: 'frank' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await receiver.restart();
    receiver.mode = 'ok';
    const last = await settles(s, receiver, 'erin', 20_000);
    expect(last.badge.total).toBe(8);
    expect(await metric(s, 'redpoint_badge_hook_retries_total')).toBeGreaterThan(0);
  });

  it('a slow receiver (2 s per request) does not slow ingest', async () => {
    await s.members('c4', { add: ['gina', 'hal'] });
    receiver.mode = { delayMs: 2_000 };
    const latencies: number[] = [];
    try {
      for (let seq = 1; seq <= 40; seq++) {
        const started = performance.now();
        await s.post({ conv: 'c4', seq, sender: 'hal' });
        latencies.push(performance.now() - started);
      }
      // Generous: each request would wait 2 s if ingest waited for the push service.
      expect(Math.max(...latencies)).toBeLessThan(1_500);
      expect(latencies.reduce((a, b) => a + b, 0)).toBeLessThan(10_000);
      const last = await settles(s, receiver, 'gina', 30_000);
      expect(last.badge.total).toBe(40);
    } finally {
      receiver.mode = 'ok';
    }
  });

  it('a forged body or a replayed (old) request fails the documented check', async () => {
    const real = receiver.requests.find((r) => r.body.includes('"uid":"alice"')) as (typeof receiver.requests)[number];
    expect(real).toBeDefined();
    const ts = Number(real.timestamp);
    expect(verifyBadgeRequest(SECRET, real, real.body, ts)).toBe('ok');
    // The body changed: its badge lowered by a forger.
    const forged = real.body.replace(/"total":\d+/, '"total":999');
    expect(forged).not.toBe(real.body);
    expect(verifyBadgeRequest(SECRET, real, forged, ts)).toBe('bad_signature');
    // Signed with another secret.
    expect(verifyBadgeRequest(SECRET, { ...real, signature: signBody('another-secret-0123456789abcdef0123', ts, real.body) }, real.body, ts)).toBe(
      'bad_signature',
    );
    // The timestamp moved, signature kept.
    expect(verifyBadgeRequest(SECRET, { ...real, timestamp: String(ts + 1) }, real.body, ts)).toBe('bad_signature');
    // The same request replayed ten minutes later.
    expect(verifyBadgeRequest(SECRET, real, real.body, ts + 600)).toBe('stale_timestamp');
    expect(verifyBadgeRequest(SECRET, { ...real, signature: undefined }, real.body, ts)).toBe('missing');
    // Every event matched the documented schema.
    expect(receiver.invalid).toBe(0);
    expect(receiver.events.length).toBeGreaterThan(0);
    // Every request carried its event's idempotency key.
    expect(real.idempotencyKey).toBe((JSON.parse(real.body) as BadgeEvent).key);
  });
});
