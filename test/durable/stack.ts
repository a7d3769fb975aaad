import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type DurableTestOptions, startTestServer, type TestServer, type TestServerOptions } from '../helpers/test-server.js';

/** One server of a stack: its options, with the durable tier's on the stack's database. */
export type StackServerOptions = Omit<TestServerOptions, 'engine' | 'redis' | 'durable'> & { durable?: Omit<DurableTestOptions, 'databaseUrl'> };

/** A private PostgreSQL and redis-server, one database, the servers on them, and plain clients to both. */
export interface DurableStack {
  postgres: PostgresServer;
  redis: RedisServer;
  databaseUrl: string;
  /** The first server; `servers` holds them all (several processes of one deployment). */
  server: TestServer;
  servers: TestServer[];
  /** A plain Redis connection, to wipe or corrupt what the servers hold. */
  admin: Redis;
  /** A plain PostgreSQL connection, to look at or corrupt the rows. */
  sql: pg.Client;
}

/**
 * The durable tests' set-up, registered as the suite's beforeAll/afterAll: the stack's fields are
 * there once the suite's tests run.
 */
export function durableStack(database: string, servers: readonly StackServerOptions[] = [{}]): DurableStack {
  const stack = {} as DurableStack;
  beforeAll(async () => {
    [stack.postgres, stack.redis] = await Promise.all([startPostgres(), startRedisServer()]);
    stack.databaseUrl = await stack.postgres.createDatabase(database);
    stack.servers = [];
    for (const options of servers) {
      stack.servers.push(
        await startTestServer({ ...options, engine: 'redis', redis: stack.redis, durable: { ...options.durable, databaseUrl: stack.databaseUrl } }),
      );
    }
    stack.server = stack.servers[0] as TestServer;
    stack.admin = new Redis(stack.redis.url);
    stack.admin.on('error', () => undefined);
    stack.sql = new pg.Client({ connectionString: stack.databaseUrl });
    // A test that crashes PostgreSQL ends this connection: heard here, not an unhandled error.
    stack.sql.on('error', () => undefined);
    await stack.sql.connect();
  });
  afterAll(async () => {
    stack.admin?.disconnect();
    await stack.sql?.end().catch(() => undefined);
    for (const server of stack.servers ?? []) await server.close();
    await Promise.all([stack.redis?.stop(), stack.postgres?.stop()]);
  });
  return stack;
}

/** What a user sees, without the cursor (a restore starts a new epoch). */
export function counts(s: UnreadSummary): unknown {
  return { total: s.total, mentions: s.mentions, categories: s.categories, conversations: s.conversations };
}
