import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY } from '../helpers/test-server.js';

/**
 * The real entry point with DATABASE_URL, killed (-9) after acknowledging changes it had not
 * yet written to PostgreSQL (its drainer waits a minute between passes). What it acknowledged
 * waits in Redis as dirty marks; the next process drains them, and after Redis is flushed every
 * count comes back from PostgreSQL.
 */
describe('durable tier: kill -9 between the Redis write and the upsert', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let databaseUrl: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer({ aof: 'always' })]);
    databaseUrl = await postgres.createDatabase('killed');
  });
  afterAll(async () => {
    for (const s of servers) await s.stop();
    await Promise.all([redis?.stop(), postgres?.stop()]);
  });

  const start = async (persistIntervalMs: number): Promise<ServerProcess> => {
    const server = await spawnServer({ REDIS_URL: redis.url, DATABASE_URL: databaseUrl, PERSIST_INTERVAL_MS: String(persistIntervalMs) });
    servers.push(server);
    return server;
  };
  const call = async (server: ServerProcess, method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(server.url + path, {
      method,
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${method} ${path} → ${res.status} ${text}`);
    return JSON.parse(text);
  };
  const counts = (s: UnreadSummary): unknown => ({ total: s.total, mentions: s.mentions, conversations: s.conversations });

  it('nothing acknowledged is lost, and the next process drains what the dead one left', async () => {
    const first = await start(60_000);
    // The drainer's first pass ran at start; everything after it waits for the next, a minute away.
    await call(first, 'PUT', '/v1/conversations/k1/members', { add: ['ka', 'kb', 'kc'] });
    for (let seq = 1; seq <= 20; seq++) {
      await call(first, 'POST', '/v1/messages', { conv: 'k1', seq, sender: seq % 2 ? 'ka' : 'kb', ...(seq % 4 === 0 ? { mentions: ['kc'] } : {}) });
    }
    await call(first, 'POST', '/v1/users/kc/read', { conv: 'k1', seq: 7 });
    await call(first, 'PUT', '/v1/users/kb/conversations/k1', { muted: true });
    const before = await Promise.all(['ka', 'kb', 'kc'].map((uid) => call(first, 'GET', `/v1/users/${uid}/unread`) as Promise<UnreadSummary>));
    const admin = new Redis(redis.url);
    try {
      expect(await admin.zcard('rp:d')).toBeGreaterThan(0);
      first.proc.kill('SIGKILL');
      await first.exited;
      const second = await start(50);
      const deadline = Date.now() + 30_000;
      while ((await admin.zcard('rp:d')) + (await admin.zcard('rp:dc')) > 0) {
        if (Date.now() > deadline) throw new Error('the second process did not drain the backlog');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await admin.flushall();
      const after = await Promise.all(['ka', 'kb', 'kc'].map((uid) => call(second, 'GET', `/v1/users/${uid}/unread`) as Promise<UnreadSummary>));
      expect(after.map(counts)).toEqual(before.map(counts));
      const kc = after[2]?.conversations.find((c) => c.conv === 'k1');
      expect(kc).toMatchObject({ unread: 13, mentions: 4 });
    } finally {
      admin.disconnect();
    }
  });
});
