import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/app.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { silentLogger, startTestServer, TEST_API_KEY, type TestServer, testConfig } from '../helpers/test-server.js';

/**
 * The durable tier's gauges as an operator scrapes them from a production-mode server: two
 * workers (the default), a private Redis and PostgreSQL, a drain pass every 3 s (issue 45, 3).
 * `redpoint_database_up` said 0 with PostgreSQL up (only the draining worker set it, and the
 * workers are combined with `min`); the backlog gauges were set after successful passes only,
 * so a stalled PostgreSQL, or a change made since the last pass, read as "backlog 0".
 */
const PERSIST_INTERVAL_MS = 3_000;
const DURABLE_GAUGES = ['redpoint_persist_backlog', 'redpoint_persist_oldest_seconds', 'redpoint_database_up'];
/** Every unlabelled sample of one scrape of `url`, by name. */
async function scrapeOf(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const [, name, value] of text.matchAll(/^(redpoint_[a-z_]+) (\S+)$/gm)) samples.set(name as string, Number(value));
  return samples;
}

const api = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

describe('durable gauges, read when scraped (WORKERS=2)', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let server: ServerProcess;
  let sql: pg.Client;
  let databaseUrl: string;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer()]);
    databaseUrl = await postgres.createDatabase('gauges');
    server = await spawnServer(
      { REDIS_URL: redis.url, DATABASE_URL: databaseUrl, WORKERS: '2', PERSIST_INTERVAL_MS: String(PERSIST_INTERVAL_MS) },
      { listenTimeoutMs: 120_000 },
    );
    sql = new pg.Client({ connectionString: databaseUrl });
    await sql.connect();
  }, 180_000);
  afterAll(async () => {
    await sql?.end().catch(() => undefined);
    await server?.stop();
    await Promise.all([redis?.stop(), postgres?.stop()]);
  });

  const scrape = (): Promise<Map<string, number>> => scrapeOf(server.url);

  async function call(method: string, path: string, body: unknown): Promise<void> {
    const res = await fetch(server.url + path, { method, headers: api, body: JSON.stringify(body) });
    expect(res.status, `${method} ${path}: ${await res.text()}`).toBe(200);
  }

  /** The conversation's records in PostgreSQL that have its first message. */
  async function rowsOf(conv: string): Promise<number> {
    return Number((await sql.query<{ n: string }>('SELECT count(*) AS n FROM redpoint_user_conv WHERE conv = $1 AND last_seq > 0', [conv])).rows[0]?.n);
  }

  /**
   * The workers are combined (max, min), so one reading is the value: every worker reading it was
   * N times the Redis look per scrape (on a cluster, an EXISTS for each of 16,384 slots, each).
   */
  it('a second worker reads neither Redis nor PostgreSQL for them: the first worker reports them', async () => {
    const durable = { databaseUrl, persistIntervalMs: 60_000, persistBatch: 2_000, backlogWarn: 1_000_000, coldAfterSeconds: 0, coldSweepSeconds: 60 };
    const second = await startServer(testConfig({ redisUrl: redis.url, durable }), silentLogger, undefined, {
      index: 1,
      count: 2,
      exposition: () => Promise.resolve(''),
    });
    try {
      const names = (await second.metrics.registry.getMetricsAsJSON()).map((m) => m.name);
      expect(names.filter((name) => DURABLE_GAUGES.includes(name))).toEqual([]);
    } finally {
      await second.close();
    }
  });

  it('redpoint_database_up is 1 while PostgreSQL answers, whichever worker drains', async () => {
    expect((await scrape()).get('redpoint_database_up')).toBe(1);
  });

  it('right after an acknowledged change, a backlog of 0 means the change is in PostgreSQL', async () => {
    await call('PUT', '/v1/conversations/fresh/members', { add: ['alice', 'bob'] });
    await call('POST', '/v1/messages', { conv: 'fresh', seq: 1, sender: 'alice' });
    const backlog = (await scrape()).get('redpoint_persist_backlog');
    // The next pass is up to 3 s away: the change is almost always still only in Redis here.
    if (backlog === 0) expect(await rowsOf('fresh'), 'backlog 0 while the change is not in PostgreSQL').toBe(2);
    else expect(backlog).toBeGreaterThanOrEqual(1);
  });

  it('with PostgreSQL locked, the gauges grow at every scrape; once it is released they fall to 0 and every change is in PostgreSQL', async () => {
    const convs = Array.from({ length: 20 }, (_, i) => `locked-${i}`);
    // The oldest mark may be a roster's, from here.
    const since = Date.now();
    for (const conv of convs) await call('PUT', `/v1/conversations/${conv}/members`, { add: ['carol', 'dave'] });
    const locker = new pg.Client({ connectionString: databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE redpoint_user_conv, redpoint_conversations IN ACCESS EXCLUSIVE MODE');
      for (const conv of convs) await call('POST', '/v1/messages', { conv, seq: 1, sender: 'carol' });
      // Scraped over more than a drain interval: passes run into the lock, the gauges say so.
      let last = 0;
      for (;;) {
        const samples = await scrape();
        const backlog = samples.get('redpoint_persist_backlog') ?? Number.NaN;
        const oldest = samples.get('redpoint_persist_oldest_seconds') ?? Number.NaN;
        expect(backlog).toBeGreaterThanOrEqual(convs.length);
        expect(oldest).toBeGreaterThanOrEqual(last);
        expect(oldest).toBeLessThanOrEqual((Date.now() - since) / 1000 + 1);
        expect(samples.get('redpoint_database_up'), 'PostgreSQL answers, locked tables or not').toBe(1);
        last = oldest;
        if (oldest > (PERSIST_INTERVAL_MS * 1.5) / 1000) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    } finally {
      await locker.query('COMMIT').catch(() => undefined);
      await locker.end();
    }
    // Released: the next passes drain; "backlog 0" is then the truth.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const samples = await scrape();
      if (samples.get('redpoint_persist_backlog') === 0) {
        expect(samples.get('redpoint_persist_oldest_seconds')).toBe(0);
        break;
      }
      if (Date.now() > deadline) throw new Error(`still ${samples.get('redpoint_persist_backlog')} marks a minute after the lock`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    for (const conv of convs) expect(await rowsOf(conv), conv).toBe(2);
  }, 120_000);
});

/** Without DATABASE_URL there is nothing to read: a `redpoint_database_up 0` there trips the alert docs/durable.md advises. */
describe('durable gauges without a durable tier', () => {
  it('are not exposed', async () => {
    const s = await startTestServer();
    try {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      expect(DURABLE_GAUGES.filter((name) => new RegExp(`^${name} `, 'm').test(text))).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

/**
 * What an operator reads while a source does not answer: a backlog Redis cannot be asked about is
 * NaN (unknown), never a reassuring 0; PostgreSQL gone is `redpoint_database_up 0`, and the
 * backlog still reads Redis's truth.
 */
describe('durable gauges while Redis or PostgreSQL does not answer', () => {
  let postgres: PostgresServer;
  let s: TestServer;
  beforeAll(async () => {
    postgres = await startPostgres();
    // No drainer: the change below stays in the backlog.
    s = await startTestServer({ engine: 'redis', durable: { databaseUrl: await postgres.createDatabase('down'), run: false } });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    await postgres?.stop();
  });

  it('Redis frozen: the backlog gauges read NaN; PostgreSQL stopped: database_up 0, the backlog read from Redis', async () => {
    await s.members('down', { add: ['alice', 'bob'] });
    await s.post({ conv: 'down', seq: 1, sender: 'alice' });
    const before = await scrapeOf(s.url);
    expect([before.get('redpoint_persist_backlog'), before.get('redpoint_database_up')]).toEqual([expect.any(Number), 1]);
    const marks = before.get('redpoint_persist_backlog') ?? 0;
    expect(marks).toBeGreaterThanOrEqual(1);

    const pid = s.redis?.pid();
    if (pid === undefined) throw new Error('no redis-server pid');
    process.kill(pid, 'SIGSTOP');
    let frozen: Map<string, number>;
    try {
      frozen = await scrapeOf(s.url);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(frozen.get('redpoint_persist_backlog')).toBeNaN();
    expect(frozen.get('redpoint_persist_oldest_seconds')).toBeNaN();
    expect(frozen.get('redpoint_database_up')).toBe(1);

    await postgres.stop();
    const noDatabase = await scrapeOf(s.url);
    expect(noDatabase.get('redpoint_database_up')).toBe(0);
    expect(noDatabase.get('redpoint_persist_backlog')).toBe(marks);
  }, 60_000);
});
