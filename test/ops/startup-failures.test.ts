import { type AddressInfo, createServer } from 'node:net';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { DurableTier } from '../../server/durable/durable-tier.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { freePort } from '../helpers/processes.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

const CREDENTIALS = { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET };

/**
 * A server that cannot start says why and exits 1: one log line naming the service and the
 * variable that pointed at it, never a native abort (exit 134, `uv_loop_close() while having open
 * handles`) from closing a process whose worker threads already listen. Run as an operator runs
 * it: the real entry point, two workers (as in production), a private Redis and PostgreSQL.
 */
describe('start-up failures exit 1 with a line naming the cause', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let closedPort: number;
  let dbCount = 0;

  beforeAll(async () => {
    [postgres, redis, closedPort] = await Promise.all([startPostgres(), startRedisServer(), freePort()]);
  });
  afterAll(async () => {
    await Promise.all([postgres?.stop(), redis?.stop()]);
  });

  /** Starts the server with `env` over the private Redis (two workers), expects it to exit 1, returns its start_failed line. */
  async function failedStart(env: Record<string, string>): Promise<string> {
    const server = await spawnServer({ REDIS_URL: redis.url, WORKERS: '2', ...env }, { waitListening: false });
    const exit = await server.exited;
    const output = server.output();
    expect(output).not.toMatch(/uv_loop_close|Assertion failed|Aborted/);
    expect(exit, output).toEqual({ code: 1, signal: null });
    expect(server.lines().some((l) => l.event === 'listening')).toBe(false);
    const failed = server.lines().filter((l) => l.event === 'start_failed');
    expect(failed, output).toHaveLength(1);
    return String(failed[0]?.msg);
  }

  const query = async <T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(sql)).rows;
    } finally {
      await client.end();
    }
  };

  it('a failure in the first worker after the other listens (OPS_PORT taken): the listening worker closes, exit 1', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const msg = await failedStart({ OPS_PORT: String(port) });
      expect(msg).toMatch(new RegExp(`^cannot start: OPS_PORT: .*127\\.0\\.0\\.1:${port}`));
    } finally {
      taken.close();
    }
  });

  it('DATABASE_URL at a closed port: PostgreSQL refused the connection', async () => {
    const msg = await failedStart({ DATABASE_URL: `postgres://postgres@127.0.0.1:${closedPort}/postgres` });
    expect(msg).toBe(`cannot start: DATABASE_URL: PostgreSQL at 127.0.0.1:${closedPort} refused the connection`);
  });

  it('DATABASE_URL at a Redis port: what answered there is not PostgreSQL', async () => {
    const msg = await failedStart({ DATABASE_URL: `postgres://postgres@127.0.0.1:${redis.port}/postgres` });
    expect(msg).toMatch(new RegExp(`^cannot start: DATABASE_URL: PostgreSQL at 127\\.0\\.0\\.1:${redis.port} did not answer as PostgreSQL`));
  });

  it('INGEST_OUTBOX_URL at a closed port and at a Redis port name INGEST_OUTBOX_URL', async () => {
    const refused = await failedStart({ INGEST_OUTBOX_URL: `postgres://postgres@127.0.0.1:${closedPort}/postgres` });
    expect(refused).toBe(`cannot start: INGEST_OUTBOX_URL: PostgreSQL at 127.0.0.1:${closedPort} refused the connection`);
    const redisThere = await failedStart({ INGEST_OUTBOX_URL: `postgres://postgres@127.0.0.1:${redis.port}/postgres` });
    expect(redisThere).toMatch(new RegExp(`^cannot start: INGEST_OUTBOX_URL: PostgreSQL at 127\\.0\\.0\\.1:${redis.port} did not answer as PostgreSQL`));
  }, 120_000);

  it('REDIS_URL unreachable: Redis refused the connection', async () => {
    const msg = await failedStart({ REDIS_URL: `redis://127.0.0.1:${closedPort}` });
    expect(msg).toMatch(new RegExp(`^cannot start: REDIS_URL: Redis at 127\\.0\\.0\\.1:${closedPort} refused the connection`));
  });

  it('a database user without CREATE rights: DATABASE_URL named with what PostgreSQL refused', async () => {
    const url = await postgres.createDatabase(`nocreate${++dbCount}`);
    // PostgreSQL 15 and later: only the database owner creates in schema public.
    await query(url, 'CREATE ROLE limited LOGIN');
    const msg = await failedStart({ DATABASE_URL: url.replace('postgres@', 'limited@') });
    expect(msg).toMatch(/^cannot start: DATABASE_URL: PostgreSQL at 127\.0\.0\.1:\d+ refused the durable tier's schema: permission denied for schema public/);
  });

  it("a database that does not exist: the login refused, with PostgreSQL's reason (in process: no need to spawn for the wording)", async () => {
    const url = postgres.url.replace(/\/postgres$/, '/nosuchdb');
    const durable = loadConfig({ ...CREDENTIALS, REDIS_URL: redis.url, DATABASE_URL: url }).durable;
    if (!durable) throw new Error('DATABASE_URL did not turn the durable tier on');
    const opening = DurableTier.open(durable, pino({ level: 'silent' }));
    await expect(opening).rejects.toThrow(`DATABASE_URL: PostgreSQL at 127.0.0.1:${postgres.port} refused the login: database "nosuchdb" does not exist`);
  });

  it('INGEST_OUTBOX_TABLE=pg_catalog.pg_class is refused: not an outbox table', async () => {
    const msg = await failedStart({ INGEST_OUTBOX_URL: postgres.url, INGEST_OUTBOX_TABLE: 'pg_catalog.pg_class' });
    expect(msg).toBe(
      'cannot start: INGEST_OUTBOX_TABLE: pg_catalog.pg_class is not an outbox table: it lacks id (bigint), payload (jsonb), created_at (timestamp with time zone)',
    );
  });

  it('an existing table of the wrong shape is refused, and nothing is created beside it', async () => {
    const url = await postgres.createDatabase(`shape${++dbCount}`);
    await query(url, 'CREATE TABLE events (id text PRIMARY KEY, payload jsonb NOT NULL)');
    const msg = await failedStart({ INGEST_OUTBOX_URL: url, INGEST_OUTBOX_TABLE: 'public.events' });
    expect(msg).toBe(
      'cannot start: INGEST_OUTBOX_TABLE: public.events is not an outbox table: id is text (an outbox needs bigint); it lacks created_at (timestamp with time zone)',
    );
    const tables = await query<{ name: string }>(url, "SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1");
    expect(tables.map((t) => t.name)).toEqual(['events']);
    const functions = await query<{ name: string }>(url, "SELECT proname AS name FROM pg_proc WHERE proname LIKE 'events%'");
    expect(functions).toEqual([]);
  });
});
