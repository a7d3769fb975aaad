import { connect, type NatsConnection, StringCodec } from 'nats';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeEvent } from '../../server/hook/badge-event.js';
import { type NatsServer, startNats } from '../helpers/nats-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The badge hook's NATS side with a real nats-server: a JetStream publish when a stream captures
 * the subject (the stream keeps the events, de-duplicated on their key), a core publish otherwise
 * (a subscriber that is there gets them).
 */
const codec = StringCodec();
let nats: NatsServer;
let redis: RedisServer;
let nc: NatsConnection;

beforeAll(async () => {
  [nats, redis] = await Promise.all([startNats(), startRedisServer()]);
  nc = await connect({ servers: nats.url });
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await Promise.all([nats?.stop(), redis?.stop()]);
});

function hook(subject: string) {
  return { nats: { url: nats.url, subject }, intervalMs: 200, attempts: 4, retryMs: 100, parkMs: 1_000, concurrency: 8, socketlessOnly: false };
}

async function settled(s: TestServer, events: BadgeEvent[], uid: string): Promise<BadgeEvent> {
  return vi.waitFor(
    async () => {
      const u = await s.unread(uid);
      const last = events.filter((e) => e.uid === uid).at(-1);
      expect(last?.badge).toEqual({
        total: u.total,
        mentions: u.mentions,
        categories: Object.fromEntries(Object.entries(u.categories).filter(([, n]) => n !== 0)),
      });
      return last as BadgeEvent;
    },
    { timeout: 15_000, interval: 50 },
  );
}

describe('badge hook over NATS', () => {
  it('JetStream when a stream captures the subject (Redis engine): every change lands in the stream, a read elsewhere lowers it', async () => {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: 'BADGES', subjects: ['js-badge.>'] });
    const s = await startTestServer({ engine: 'redis', redis, config: { badgeHook: hook('js-badge') } });
    const events: BadgeEvent[] = [];
    const consumer = await nc.jetstream().consumers.get('BADGES');
    const messages = await consumer.consume();
    const reading = (async () => {
      for await (const m of messages) {
        events.push(JSON.parse(codec.decode(m.data)) as BadgeEvent);
        expect(m.subject).toBe(`js-badge.${events.at(-1)?.uid}`);
        // The stream's de-duplication id is the event's idempotency key.
        expect(m.headers?.get('Nats-Msg-Id')).toBe(events.at(-1)?.key);
      }
    })();
    try {
      await s.members('n1', { add: ['ann', 'ben'] });
      for (let seq = 1; seq <= 12; seq++) await s.post({ conv: 'n1', seq, sender: 'ben', ...(seq === 12 ? { mentions: ['ann'] } : {}) });
      expect((await settled(s, events, 'ann')).badge).toEqual({ total: 12, mentions: 1, categories: { default: 12 } });
      await s.api('POST', '/v1/users/ann/read', { conv: 'n1', seq: 12 });
      const last = await settled(s, events, 'ann');
      expect(last.badge.total).toBe(0);
      expect(last.change.total).toBe(-12);
      const seqs = events.filter((e) => e.uid === 'ann').map((e) => e.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    } finally {
      messages.stop();
      await reading;
      await s.close();
    }
  });

  it('core NATS when no stream captures it (memory engine): a subscriber gets the latest badge', async () => {
    const s = await startTestServer({ engine: 'memory', config: { badgeHook: hook('core-badge') } });
    const events: BadgeEvent[] = [];
    const sub = nc.subscribe('core-badge.>', { callback: (_err, m) => events.push(JSON.parse(codec.decode(m.data)) as BadgeEvent) });
    try {
      await s.members('n2', { add: ['cid', 'dot'] });
      for (let seq = 1; seq <= 7; seq++) await s.post({ conv: 'n2', seq, sender: 'dot' });
      expect((await settled(s, events, 'cid')).badge.total).toBe(7);
    } finally {
      sub.unsubscribe();
      await s.close();
    }
  });
});
