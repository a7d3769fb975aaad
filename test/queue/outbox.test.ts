import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboxDdl } from '../../server/queue/outbox-sql.js';
import type { QueueConfig } from '../../server/queue/start-queue.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { counterValue, eventually, OutboxWriter } from './queue-helpers.js';

/**
 * The outbox source in a real server over a real PostgreSQL: records applied in id order and
 * deleted only once applied, poison to the dead letter without holding up the rest, unknown
 * conversations retried then dead-lettered, a store that does not answer waited out.
 */
describe('ingest from a PostgreSQL outbox', () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  const cleanup: (() => Promise<void>)[] = [];
  let dbCount = 0;

  beforeAll(async () => {
    [postgres, redis] = await Promise.all([startPostgres(), startRedisServer({ aof: 'always' })]);
  });
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    await Promise.all([postgres?.stop(), redis?.stop()]);
  });

  async function setup(queue: Partial<QueueConfig> = {}, prefix?: string): Promise<{ server: TestServer; outbox: OutboxWriter; url: string }> {
    const url = await postgres.createDatabase(`outbox${++dbCount}`);
    const server = await startTestServer({
      engine: 'redis',
      redis,
      ...(prefix ? { redisPrefix: prefix } : {}),
      config: { queue: { outbox: { url, table: 'redpoint_outbox' }, batch: 50, retrySeconds: 2, outboxPollMs: 200, ...queue } },
    });
    cleanup.push(() => server.close());
    const outbox = await OutboxWriter.open(url);
    cleanup.push(() => outbox.close());
    return { server, outbox, url };
  }

  it('applies records through the ingest path and deletes them once applied', async () => {
    const { server, outbox } = await setup();
    await outbox.insert([
      { type: 'members', conv: 'c1', add: ['alice', 'bob'] },
      { type: 'message', conv: 'c1', seq: 1, sender: 'alice' },
      { type: 'message', conv: 'c1', seq: 2, sender: 'alice', mentions: ['bob'] },
      { type: 'message', conv: 'c1', seq: 3, sender: 'alice' },
      { type: 'read', uid: 'bob', conv: 'c1', seq: 1 },
    ]);
    const bob = await eventually('bob sees 2 unread', async () => {
      const u = await server.unread('bob');
      return u.total === 2 ? u : undefined;
    });
    expect(bob.mentions).toBe(1);
    expect((await server.unread('alice')).total).toBe(0);
    await eventually('the rows are gone', async () => ((await outbox.count()) === 0 ? true : undefined));
    const registry = server.server.metrics.registry;
    expect(await counterValue(registry, 'redpoint_ingest_records_total', { source: 'outbox', outcome: 'applied' })).toBe(5);
    expect(await counterValue(registry, 'redpoint_ingest_messages_total', {})).toBe(3);

    await outbox.insert([
      { type: 'settings', uid: 'bob', conv: 'c1', muted: true },
      { type: 'message', conv: 'c1', seq: 4, sender: 'alice' },
    ]);
    await eventually('bob muted c1', async () => {
      const u = await server.unread('bob');
      return u.conversations[0]?.muted && u.conversations[0].lastSeq === 4 ? u : undefined;
    });
    await outbox.insert([{ type: 'delete', uid: 'alice', conv: 'c1' }]);
    await eventually('alice deleted c1', async () => ((await server.unread('alice')).conversations.length === 0 ? true : undefined));
  });

  it('sends malformed and invalid records to the dead letter with their reason, and applies the records behind them', async () => {
    const { server, outbox } = await setup();
    await outbox.insert([
      { type: 'members', conv: 'p1', add: ['u1', 'u2'] },
      'not an object',
      { type: 'message', conv: 'p1', seq: 1, sender: 'u1' },
      { type: 'shout', conv: 'p1' },
      { type: 'message', conv: 'p1', seq: 0, sender: 'u1' },
      { type: 'read', uid: 'u2', conv: 'p1', seq: 1, extra: true },
      { type: 'message', conv: 'p1', seq: 2, sender: 'u1' },
    ]);
    await eventually('u2 sees 2 unread', async () => ((await server.unread('u2')).total === 2 ? true : undefined));
    const dead = await eventually('four dead letters', async () => {
      const rows = await outbox.dead();
      return rows.length === 4 ? rows : undefined;
    });
    expect(dead.map((d) => d.reason)).toEqual([
      expect.stringMatching(/^invalid_request: \(record\): not a JSON object/),
      expect.stringMatching(/^invalid_request: \/type: must be one of/),
      expect.stringMatching(/^invalid_request: \/seq/),
      expect.stringMatching(/^invalid_request: \/extra/),
    ]);
    expect(dead[0]?.payload).toBe('not an object');
    expect(await outbox.count()).toBe(0);
    expect(await counterValue(server.server.metrics.registry, 'redpoint_ingest_dead_letters_total', { source: 'outbox' })).toBe(4);
  });

  it('dead-letters a timestamp sent as a seq (MAX_SEQ_JUMP by default) and applies the records behind it', async () => {
    const { server, outbox } = await setup();
    await outbox.insert([
      { type: 'members', conv: 'j1', add: ['u1', 'u2'] },
      { type: 'message', conv: 'j1', seq: 1_796_520_749_000, sender: 'u1' },
      { type: 'message', conv: 'j1', seq: 1, sender: 'u1' },
    ]);
    const [dead] = await eventually('one dead letter', async () => {
      const rows = await outbox.dead();
      return rows.length === 1 ? rows : undefined;
    });
    // Refused for good: a retry would meet the same head, so it is not retried.
    expect(dead?.reason).toMatch(/^seq_jump: seq 1796520749000 of conversation j1 .* head 0\b.*MAX_SEQ_JUMP 100000/);
    await eventually('u2 sees 1 unread', async () => ((await server.unread('u2')).total === 1 ? true : undefined));
    await eventually('the rows are gone', async () => ((await outbox.count()) === 0 ? true : undefined));
  });

  it('retries a record whose conversation does not exist yet until its membership arrives, and dead-letters it after the retry time', async () => {
    const { server, outbox } = await setup({ retrySeconds: 3 });
    await outbox.insert([{ type: 'message', conv: 'late', seq: 1, sender: 'x' }]);
    await eventually('a retry booked', async () => ((await outbox.count('redpoint_outbox_retry')) === 1 ? true : undefined));
    await outbox.insert([{ type: 'members', conv: 'late', add: ['x', 'y'] }]);
    await eventually('y sees the message', async () => ((await server.unread('y')).total === 1 ? true : undefined));
    await eventually('nothing left', async () => ((await outbox.count()) + (await outbox.count('redpoint_outbox_retry')) === 0 ? true : undefined));

    await outbox.insert([{ type: 'message', conv: 'never', seq: 1, sender: 'x' }]);
    const [dead] = await eventually('dead-lettered after about 3 s', async () => {
      const rows = await outbox.dead();
      return rows.length === 1 ? rows : undefined;
    });
    expect(dead?.reason).toMatch(/^unknown_conversation: .* \(retried \d+ times\)$/);
    expect(await outbox.count()).toBe(0);
    const registry = server.server.metrics.registry;
    expect(await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'outbox', cause: 'unknown_conversation' })).toBeGreaterThanOrEqual(3);
  });

  it('holds records while the store does not answer and applies them once it is back', async () => {
    const { server, outbox } = await setup({}, 'down');
    await outbox.insert([{ type: 'members', conv: 'd1', add: ['a', 'b'] }]);
    await eventually('the conversation made', async () => ((await outbox.count()) === 0 ? true : undefined));
    await redis.kill();
    await outbox.insert([1, 2, 3].map((seq) => ({ type: 'message', conv: 'd1', seq, sender: 'a' })));
    const registry = server.server.metrics.registry;
    await eventually('held for the store', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'outbox', cause: 'store' })) > 0 ? true : undefined,
    );
    expect(await outbox.count()).toBe(3);
    expect(await outbox.dead()).toEqual([]);
    await redis.restart();
    await eventually('b sees 3 unread', async () => ((await server.unread('b')).total === 3 ? true : undefined), 60_000);
    await eventually('the rows are gone', async () => ((await outbox.count()) === 0 ? true : undefined));
    expect(await outbox.dead()).toEqual([]);
  });

  it('releases held rows on shutdown', async () => {
    const { server, outbox, url } = await setup({}, 'stop');
    await outbox.insert([{ type: 'members', conv: 's1', add: ['a', 'b'] }]);
    await eventually('s1 made', async () => ((await outbox.count()) === 0 ? true : undefined));
    await redis.kill();
    await outbox.insert([1, 2].map((seq) => ({ type: 'message', conv: 's1', seq, sender: 'a' })));
    const registry = server.server.metrics.registry;
    await eventually('held for the store', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'outbox', cause: 'store' })) > 0 ? true : undefined,
    );
    await server.close();
    // Not locked by anyone any more: NOWAIT would fail on a row another transaction holds.
    await outbox.client.query('BEGIN');
    const { rows } = await outbox.client.query('SELECT id FROM redpoint_outbox FOR UPDATE NOWAIT');
    await outbox.client.query('ROLLBACK');
    expect(rows.length).toBe(2);
    await redis.restart();
    const again = await startTestServer({
      engine: 'redis',
      redis,
      redisPrefix: 'stop',
      config: { queue: { outbox: { url, table: 'redpoint_outbox' }, batch: 50, retrySeconds: 2, outboxPollMs: 200 } },
    });
    cleanup.push(() => again.close());
    await eventually('b sees 2 unread', async () => ((await again.unread('b')).total === 2 ? true : undefined), 60_000);
    await eventually('the rows are gone', async () => ((await outbox.count()) === 0 ? true : undefined));
  });

  it('starts on tables the message service owns, with no more than DML granted', async () => {
    const url = await postgres.createDatabase(`outbox${++dbCount}`);
    const owner = await OutboxWriter.open(url);
    cleanup.push(() => owner.close());
    for (const statement of outboxDdl('redpoint_outbox')) await owner.client.query(statement);
    await owner.client.query(`CREATE ROLE rp_dml${dbCount} LOGIN`);
    await owner.client.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON redpoint_outbox, redpoint_outbox_retry, redpoint_outbox_dead TO rp_dml${dbCount}`);
    const limited = url.replace('postgres://postgres@', `postgres://rp_dml${dbCount}@`);
    const server = await startTestServer({
      engine: 'redis',
      redis,
      config: { queue: { outbox: { url: limited, table: 'redpoint_outbox' }, batch: 50, retrySeconds: 2, outboxPollMs: 200 } },
    });
    cleanup.push(() => server.close());
    await owner.insert([
      { type: 'members', conv: 'own', add: ['a', 'b'] },
      { type: 'message', conv: 'own', seq: 1, sender: 'a' },
    ]);
    await eventually('b sees the message', async () => ((await server.unread('b')).total === 1 ? true : undefined));
    await eventually('the rows are gone', async () => ((await owner.count()) === 0 ? true : undefined));
  });

  it('a start refused (an outbox table of the wrong shape) leaves no connection of its own open in PostgreSQL', async () => {
    const url = await postgres.createDatabase(`outbox${++dbCount}`);
    const owner = await OutboxWriter.open(url);
    cleanup.push(() => owner.close());
    await owner.client.query('CREATE TABLE redpoint_outbox (id text PRIMARY KEY, payload jsonb NOT NULL)');
    const starting = startTestServer({ engine: 'redis', redis, config: { queue: { outbox: { url, table: 'redpoint_outbox' }, batch: 50, retrySeconds: 2 } } });
    await expect(starting).rejects.toThrow(/is not an outbox table/);
    // The pool's idle connection would otherwise linger for pg's idle timeout (10 s).
    const left = async (): Promise<number> =>
      Number(
        (
          await owner.client.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'redpoint-outbox' AND datname = current_database()",
          )
        ).rows[0]?.n,
      );
    await eventually('no redpoint-outbox connection left', async () => ((await left()) === 0 ? true : undefined), 3_000);
  });

  it('reports the rows waiting and the age of the oldest', async () => {
    const { server, outbox } = await setup({ retrySeconds: 600 });
    // Waiting for conversations that do not exist: they stay, retried now and then.
    await outbox.insert([1, 2].map((seq) => ({ type: 'message', conv: 'nowhere', seq, sender: 'a' })));
    await eventually('both booked for a retry', async () => ((await outbox.count('redpoint_outbox_retry')) === 2 ? true : undefined));
    const text = await server.server.metrics.registry.metrics();
    expect(text).toMatch(/redpoint_ingest_waiting_records\{source="outbox"\} 2\n/);
    const age = Number(/redpoint_ingest_oldest_record_age_seconds\{source="outbox"\} ([0-9.e-]+)/.exec(text)?.[1]);
    expect(age).toBeGreaterThan(0);
    expect(age).toBeLessThan(60);
  });
});
