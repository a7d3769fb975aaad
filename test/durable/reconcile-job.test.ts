import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/** RECONCILE_EVERY with the durable tier: the job walks Redis against PostgreSQL too, and repairs. */
describe('durable tier: the periodic reconcile job includes the database', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let server: TestServer;
  let admin: Redis;
  let sql: pg.Client;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer()]);
    const databaseUrl = await postgres.createDatabase('job');
    server = await startTestServer({
      engine: 'redis',
      redis,
      redisPrefix: 'j',
      durable: { databaseUrl, run: false },
      config: { reconcileEverySeconds: 3600, reconcileRate: 10_000 },
    });
    admin = new Redis(redis.url);
    sql = new pg.Client({ connectionString: databaseUrl });
    await sql.connect();
  });
  afterAll(async () => {
    admin?.disconnect();
    await sql?.end();
    await server?.close();
    await Promise.all([redis?.stop(), postgres?.stop()]);
  });

  it('a record whose dirty mark was lost reaches PostgreSQL after one walk, counted in redpoint_reconcile_repaired_total', async () => {
    const job = server.server.reconcileJob;
    if (!job) throw new Error('no reconcile job');
    await server.members('jobconv', { add: ['ja', 'jb'] });
    await server.post([1, 2, 3].map((seq) => ({ conv: 'jobconv', seq, sender: 'ja' })));
    await server.durable?.persister.drainAll(Date.now() + 20_000);
    await server.ok('POST', '/v1/users/jb/read', { conv: 'jobconv', seq: 2 });
    expect(await admin.zrem('j:d', 'jb|jobconv')).toBe(1);

    await job.walk();
    await server.durable?.persister.drainAll(Date.now() + 20_000);
    const { rows } = await sql.query("SELECT read_seq FROM redpoint_user_conv WHERE uid = 'jb' AND conv = 'jobconv'");
    expect(rows[0]?.read_seq).toBe('2');
    const metrics = (await server.request('GET', '/metrics', { auth: 'none' })).text;
    expect(metrics).toMatch(/^redpoint_reconcile_repaired_total\{kind="db-behind"\} 1$/m);
  }, 60_000);
});
