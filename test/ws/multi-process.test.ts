import { Redis } from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AckFrame } from '../../protocol/frames.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { expectMatchesServer, isChange, isHead, waitMatchesServer } from '../helpers/ws-expect.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * Two Redpoint processes of one deployment (two `startServer`s here, one key prefix) on a private
 * redis-server: the Redis engine for state AND the Redis bus for notifications. A change made
 * through either process reaches the devices connected to the other.
 */
const BUS_PREFIX = 'rp:bus:';

let redis: RedisServer;
let a: TestServer;
let b: TestServer;
let probe: Redis;
let n = 0;

beforeAll(async () => {
  redis = await startRedisServer();
  const shared = { engine: 'redis' as const, redis, redisPrefix: `mp${process.pid}`, largeGroupThreshold: 3 };
  a = await startTestServer(shared);
  b = await startTestServer(shared);
  expect(a.config.redisUrl).toBe(redis.url);
  expect(b.config.redisUrl).toBe(redis.url);
  probe = new Redis(redis.url);
});

afterAll(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
  await probe?.quit();
  await redis?.stop();
});

/**
 * The bus SUBSCRIBE of a process goes out asynchronously after a client's hello; a publish by the
 * other process before Redis registered it would be missed (and repaired by a pull, but then this
 * test would not be testing the bus). Waits until Redis reports `count` subscribed processes.
 */
async function subscribed(channel: string, count: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const reply = (await probe.call('PUBSUB', 'NUMSUB', BUS_PREFIX + channel)) as [string, number];
    if (Number(reply[1]) >= count) return;
    if (Date.now() > deadline) throw new Error(`${channel}: ${reply[1]} subscribers, wanted ${count}`);
    await delay(10);
  }
}

const ids = (...names: string[]): string[] => {
  n++;
  return names.map((name) => `${name}-${n}`);
};

describe('two server processes over one Redis', () => {
  it('a message ingested through A is pushed to a client connected to B', async () => {
    const [alice, bob, dm] = ids('alice', 'bob', 'dm') as [string, string, string];
    await a.members(dm, { add: [alice, bob] });
    const onB = await b.client(alice, { binary: true });
    await subscribed(`{u:${alice}}`, 1);

    const m = onB.mark();
    await a.post({ conv: dm, seq: 1, sender: bob, mentions: [alice] });
    const push = await onB.waitFrame(isChange(dm, (f) => f.state?.lastSeq === 1), { since: m });
    expect(push.v).toBe((await a.position(alice)).version);
    expect(onB.stats.pullsSent).toBe(0);
    expect(onB.summary()).toMatchObject({ total: 1, mentions: 1 });
    await expectMatchesServer(onB, a, 'client on B vs unread on A');
    await expectMatchesServer(onB, b, 'client on B vs unread on B');
  });

  it("a read from B's client reaches the same user's device on A", async () => {
    const [alice, bob, dm] = ids('alice', 'bob', 'dm') as [string, string, string];
    await a.members(dm, { add: [alice, bob] });
    await b.post([
      { conv: dm, seq: 1, sender: bob },
      { conv: dm, seq: 2, sender: bob },
    ]);
    const onA = await a.client(alice);
    const onB = await b.client(alice, { binary: true });
    await subscribed(`{u:${alice}}`, 2);
    expect(onA.summary().total).toBe(2);

    const m = onA.mark();
    const ack = (await onB.read([[dm, 2]])) as AckFrame;
    expect(ack.t).toBe('ack');
    const push = await onA.waitFrame(isChange(dm, (f) => f.state?.readSeq === 2), { since: m });
    expect(push.v).toBe(ack.version);
    await onA.waitFor(() => onA.cursor?.version === ack.version, 5000, 'A at the ack version');
    expect(onA.summary().total).toBe(0);
    await expectMatchesServer(onA, a, 'device on A');
    await expectMatchesServer(onB, b, 'device on B');
  });

  it('large-group heads and membership changes cross processes', async () => {
    const [alice, bob, carol, dave, erin, big] = ids('alice', 'bob', 'carol', 'dave', 'erin', 'big') as [string, string, string, string, string, string];
    await a.members(big, { add: [alice, bob, carol, dave] });
    const carolOnB = await b.client(carol);
    const erinOnB = await b.client(erin, { binary: true });
    // B follows the group because carol is online there.
    await subscribed(`{c:${big}}`, 1);
    await subscribed(`{u:${erin}}`, 1);

    let m = carolOnB.mark();
    await a.post({ conv: big, seq: 1, sender: bob });
    await carolOnB.waitFrame(isHead(big, 1), { since: m });
    await expectMatchesServer(carolOnB, a, 'carol');

    // Erin joins through A while connected to B: B hears the join on the bus and follows the group.
    const me = erinOnB.mark();
    await a.members(big, { add: [erin] });
    await erinOnB.waitFrame(isChange(big, (f) => f.state?.large === true), { since: me });
    m = erinOnB.mark();
    await a.post({ conv: big, seq: 2, sender: bob });
    await erinOnB.waitFrame(isHead(big, 2), { since: m });
    const got = await waitMatchesServer(erinOnB, a);
    expect(got.conversations).toMatchObject([{ conv: big, lastSeq: 2, readSeq: 1, unread: 1 }]);
  });
});
