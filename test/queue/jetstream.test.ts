import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueueConfig } from '../../server/queue/start-queue.js';
import { type NatsServer, startNats } from '../helpers/nats-server.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { counterValue, eventually, NatsWriter } from './queue-helpers.js';

/**
 * The JetStream source in a real server over a real nats-server -js: the stream and the durable
 * consumer created, records acked only once applied, poison to the dead-letter subject with its
 * reason, unknown conversations retried (nak with a delay) then dead-lettered, a store that does
 * not answer waited out, a NATS restart survived.
 */
describe('ingest from NATS JetStream', () => {
  let nats: NatsServer;
  let redis: RedisServer;
  const cleanup: (() => Promise<void>)[] = [];
  let n = 0;

  beforeAll(async () => {
    [nats, redis] = await Promise.all([startNats(), startRedisServer({ aof: 'always' })]);
  });
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    await Promise.all([nats?.stop(), redis?.stop()]);
  });

  /** Each test its own stream and subject on the one nats-server. */
  async function setup(
    queue: Partial<QueueConfig> = {},
    prefix?: string,
  ): Promise<{ server: TestServer; writer: NatsWriter; stream: string; subject: string }> {
    n += 1;
    const stream = `S${n}`;
    const subject = `ingest${n}`;
    const server = await startTestServer({
      engine: 'redis',
      redis,
      ...(prefix ? { redisPrefix: prefix } : {}),
      config: { queue: { nats: { url: nats.url, stream, subject }, batch: 50, retrySeconds: 2, ...queue } },
    });
    cleanup.push(() => server.close());
    const writer = await NatsWriter.open(nats.url);
    cleanup.push(() => writer.close());
    return { server, writer, stream, subject };
  }

  it('applies records through the ingest path and acks them once applied', async () => {
    const { server, writer, stream, subject } = await setup();
    await writer.publish([{ type: 'members', conv: 'c1', add: ['alice', 'bob'] }], subject);
    await eventually('c1 made', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    await writer.publish(
      [
        { type: 'message', conv: 'c1', seq: 1, sender: 'alice' },
        { type: 'message', conv: 'c1', seq: 2, sender: 'alice', mentions: ['bob'] },
        { type: 'message', conv: 'c1', seq: 3, sender: 'alice' },
        { type: 'read', uid: 'bob', conv: 'c1', seq: 1 },
      ],
      subject,
    );
    const bob = await eventually('bob sees 2 unread', async () => {
      const u = await server.unread('bob');
      return u.total === 2 ? u : undefined;
    });
    expect(bob.mentions).toBe(1);
    await eventually('all acked', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    const registry = server.server.metrics.registry;
    expect(await counterValue(registry, 'redpoint_ingest_records_total', { source: 'jetstream', outcome: 'applied' })).toBe(5);
  });

  it('publishes malformed and invalid records to the dead-letter subject with their reason, and applies the records behind them', async () => {
    const { server, writer, stream, subject } = await setup();
    await writer.publish([{ type: 'members', conv: 'p1', add: ['u1', 'u2'] }], subject);
    await eventually('p1 made', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    // Published one by one: their order in the stream is the order here.
    for (const r of [
      '{not json',
      { type: 'message', conv: 'p1', seq: 1, sender: 'u1' },
      '[1,2]',
      { type: 'members', conv: 'p1', add: 'u3' },
      { type: 'message', conv: 'p1', seq: 2, sender: 'u1' },
    ]) {
      await writer.publish([r], subject);
    }
    await eventually('u2 sees 2 unread', async () => ((await server.unread('u2')).total === 2 ? true : undefined));
    const dead = await eventually('three dead letters', async () => {
      const d = await writer.dead(`${stream}_DEAD`);
      return d.length === 3 ? d : undefined;
    });
    expect(dead.map((d) => d.data)).toEqual(['{not json', '[1,2]', JSON.stringify({ type: 'members', conv: 'p1', add: 'u3' })]);
    expect(dead.map((d) => d.reason)).toEqual([
      expect.stringMatching(/^bad_json: \(record\): not JSON/),
      expect.stringMatching(/^invalid_request: \(record\): not a JSON object/),
      expect.stringMatching(/^invalid_request: \/add/),
    ]);
    await eventually('nothing waiting', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    expect(await counterValue(server.server.metrics.registry, 'redpoint_ingest_dead_letters_total', { source: 'jetstream' })).toBe(3);
  });

  it('retries a record whose conversation does not exist yet until its membership arrives, and dead-letters it after the retry time', async () => {
    const { server, writer, stream, subject } = await setup({ retrySeconds: 3 });
    await writer.publish([{ type: 'message', conv: 'late', seq: 1, sender: 'x' }], subject);
    const registry = server.server.metrics.registry;
    await eventually('a retry', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'jetstream', cause: 'unknown_conversation' })) > 0 ? true : undefined,
    );
    await writer.publish([{ type: 'members', conv: 'late', add: ['x', 'y'] }], subject);
    await eventually('y sees the message', async () => ((await server.unread('y')).total === 1 ? true : undefined));
    await eventually('nothing waiting', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));

    await writer.publish([{ type: 'message', conv: 'never', seq: 1, sender: 'x' }], subject);
    const [dead] = await eventually('dead-lettered after about 3 s', async () => {
      const d = await writer.dead(`${stream}_DEAD`);
      return d.length === 1 ? d : undefined;
    });
    expect(dead?.reason).toMatch(/^unknown_conversation: .* \(retried \d+ times\)$/);
    await eventually('nothing waiting', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
  });

  it('holds records while the store does not answer, and survives a NATS restart', async () => {
    const { server, writer, stream, subject } = await setup();
    await writer.publish([{ type: 'members', conv: 'd1', add: ['a', 'b'] }], subject);
    await eventually('d1 made', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    await redis.kill();
    await writer.publish(
      [1, 2, 3].map((seq) => ({ type: 'message', conv: 'd1', seq, sender: 'a' })),
      subject,
    );
    const registry = server.server.metrics.registry;
    await eventually('held for the store', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'jetstream', cause: 'store' })) > 0 ? true : undefined,
    );
    expect(await writer.waiting(stream)).toBe(3);
    await redis.restart();
    await eventually('b sees 3 unread', async () => ((await server.unread('b')).total === 3 ? true : undefined), 60_000);
    await eventually('nothing waiting', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));

    await nats.kill();
    await nats.start();
    await writer.publish(
      [4, 5].map((seq) => ({ type: 'message', conv: 'd1', seq, sender: 'a' })),
      subject,
    );
    await eventually('b sees 5 unread', async () => ((await server.unread('b')).total === 5 ? true : undefined), 60_000);
    await eventually('nothing waiting', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    expect(await writer.dead(`${stream}_DEAD`)).toEqual([]);
  });

  it('gives held records back on shutdown, and the next process applies them', async () => {
    const { server, writer, stream, subject } = await setup({}, 'js-stop');
    await writer.publish([{ type: 'members', conv: 's1', add: ['a', 'b'] }], subject);
    await eventually('s1 made', async () => ((await writer.waiting(stream)) === 0 ? true : undefined));
    await redis.kill();
    await writer.publish(
      [1, 2].map((seq) => ({ type: 'message', conv: 's1', seq, sender: 'a' })),
      subject,
    );
    const registry = server.server.metrics.registry;
    await eventually('held for the store', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'jetstream', cause: 'store' })) > 0 ? true : undefined,
    );
    await server.close();
    await redis.restart();
    // Nak'ed at shutdown. (That they come back sooner than the 10 s ack wait is not asserted:
    // restarting Redis and the next server takes a good part of it on a loaded machine.)
    const again = await startTestServer({
      engine: 'redis',
      redis,
      redisPrefix: 'js-stop',
      config: { queue: { nats: { url: nats.url, stream, subject }, batch: 50, retrySeconds: 2 } },
    });
    cleanup.push(() => again.close());
    await eventually('b sees 2 unread', async () => ((await again.unread('b')).total === 2 ? true : undefined), 60_000);
  });

  it('reports the records waiting and the age of the oldest', async () => {
    const { server, writer, subject } = await setup({ retrySeconds: 600 });
    await writer.publish(
      [1, 2].map((seq) => ({ type: 'message', conv: 'nowhere', seq, sender: 'a' })),
      subject,
    );
    const registry = server.server.metrics.registry;
    await eventually('both retried', async () =>
      (await counterValue(registry, 'redpoint_ingest_retries_total', { source: 'jetstream', cause: 'unknown_conversation' })) >= 2 ? true : undefined,
    );
    const text = await registry.metrics();
    expect(text).toMatch(/redpoint_ingest_waiting_records\{source="jetstream"\} 2\n/);
    const age = Number(/redpoint_ingest_oldest_record_age_seconds\{source="jetstream"\} ([0-9.e-]+)/.exec(text)?.[1]);
    expect(age).toBeGreaterThan(0);
    expect(age).toBeLessThan(60);
  });
});
