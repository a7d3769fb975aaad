import { Redis } from 'ioredis';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RestoreLog } from '../../server/durable/restore-log.js';
import { type LoggedServer, startLoggedServer } from '../helpers/logged-server.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';

/** A metric's value in a Prometheus exposition (0 when absent). */
function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/**
 * A Redis that lost everything is restored from PostgreSQL on touch, and an operator hears of it:
 * one info line per burst of restores naming how many users and conversations came back and from
 * where, and a counter of bursts (issue 45, point 4: only redpoint_restored_total moved).
 */
describe('restores from PostgreSQL are logged, one line per burst', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let admin: Redis;
  let server: LoggedServer;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer({ aof: 'always' })]);
    admin = new Redis(redis.url);
    const databaseUrl = await postgres.createDatabase('restorelog');
    server = await startLoggedServer({ REDIS_URL: redis.url, DATABASE_URL: databaseUrl, PERSIST_INTERVAL_MS: '50' });
  });
  afterAll(async () => {
    await server?.close();
    admin?.disconnect();
    await Promise.all([postgres?.stop(), redis?.stop()]);
  });

  const ok = async (method: string, path: string, body?: unknown): Promise<void> => {
    const res = await server.call(method, path, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  it('FLUSHALL under the durable tier, then touches: one line naming the counts and PostgreSQL, the burst counted', async () => {
    await ok('PUT', '/v1/conversations/team/members', { add: ['alice', 'bob', 'carol'] });
    await ok('POST', '/v1/messages', { conv: 'team', seq: 1, sender: 'carol' });
    const durable = server.server.durable;
    if (!durable?.persister) throw new Error('no drainer');
    await durable.persister.drainAll(Date.now() + 20_000);
    expect(server.lines.filter((l) => l.event === 'restored')).toEqual([]);

    await admin.flushall();
    // Three touches at once: one burst (its bounds are RestoreLog's, tested with a fake clock below).
    await Promise.all(['alice', 'bob', 'carol'].map((uid) => ok('GET', `/v1/users/${uid}/unread`)));
    const line = await server.waitLog((l) => l.event === 'restored');
    expect(line.level).toBe(30);
    expect(line).toMatchObject({ users: 3, source: `PostgreSQL at 127.0.0.1:${postgres.port}` });
    expect(line.msg).toMatch(new RegExp(`^restored 3 users and \\d+ conversations? from PostgreSQL at 127\\.0\\.0\\.1:${postgres.port}`));
    const metrics = await server.metrics();
    expect(metricValue(metrics, 'redpoint_restore_bursts_total')).toBe(1);
    expect(metricValue(metrics, 'redpoint_restored_total{kind="user"}')).toBe(3);

    // Touching what is back restores nothing more; a second wipe is a second burst.
    await ok('GET', '/v1/users/alice/unread');
    await durable.persister.drainAll(Date.now() + 20_000);
    await admin.flushall();
    const since = server.lines.length;
    await ok('GET', '/v1/users/bob/unread');
    const second = await server.waitLog((l) => l.event === 'restored', 10_000, since);
    expect(second).toMatchObject({ users: 1 });
    expect(server.lines.filter((l) => l.event === 'restored')).toHaveLength(2);
    expect(metricValue(await server.metrics(), 'redpoint_restore_bursts_total')).toBe(2);
  }, 60_000);
});

describe('RestoreLog: where a burst ends', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function logged(): { restoreLog: RestoreLog; lines: Array<Record<string, unknown>>; registry: Registry } {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'info' }, { write: (chunk: string) => lines.push(JSON.parse(chunk) as Record<string, unknown>) });
    const registry = new Registry();
    return { restoreLog: new RestoreLog(log, registry, { source: 'PostgreSQL at db:5432', quietMs: 1_000, longestMs: 30_000 }), lines, registry };
  }

  it('restores less than the quiet time apart are one line; a quiet second ends the burst', () => {
    vi.useFakeTimers();
    const { restoreLog, lines } = logged();
    restoreLog.add('user', 2);
    vi.advanceTimersByTime(900);
    restoreLog.add('conversation', 1);
    vi.advanceTimersByTime(900);
    restoreLog.add('user', 1);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(1_000);
    expect(lines).toMatchObject([{ event: 'restored', users: 3, conversations: 1, source: 'PostgreSQL at db:5432', ms: 1_800 }]);
    restoreLog.add('user', 1);
    vi.advanceTimersByTime(1_000);
    expect(lines.map((l) => l.users)).toEqual([3, 1]);
  });

  it('a burst that goes on is reported every longest time; flush reports what is pending, once', async () => {
    vi.useFakeTimers();
    const { restoreLog, lines, registry } = logged();
    for (let t = 0; t < 32; t++) {
      restoreLog.add('user', 1);
      vi.advanceTimersByTime(999);
    }
    expect(lines).toHaveLength(1);
    restoreLog.flush();
    restoreLog.flush();
    expect(lines).toHaveLength(2);
    expect(lines.map((l) => l.users)).toEqual([31, 1]);
    expect((await registry.getSingleMetric('redpoint_restore_bursts_total')?.get())?.values[0]?.value).toBe(2);
  });
});
