import { Redis } from 'ioredis';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AckFrame } from '../../protocol/frames.js';
import { convKeys, userKeys } from '../../server/engine/redis/keys.js';
import { convChannel, userChannel } from '../../server/gateway/fanout.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { expectMatchesServer, isChange, isHead, waitMatchesServer } from '../helpers/ws-expect.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * Two Redpoint processes of one deployment on a 3-master Redis Cluster, as with
 * REDIS_CLUSTER_NODES: the Redis engine on the cluster for state, and sharded pub/sub (SPUBLISH /
 * SSUBSCRIBE) for notifications. A change made through either process reaches the devices
 * connected to the other, and each channel lives on the master that holds its user's (or
 * conversation's) keys.
 */
const BUS_PREFIX = 'rp:bus:';

let cluster: RedisCluster;
let a: TestServer;
let b: TestServer;
let probes: Redis[] = [];
let prefix: string;
let n = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
  prefix = `cl${process.pid}`;
  const shared = { engine: 'redis' as const, redisCluster: cluster, redisPrefix: prefix, largeGroupThreshold: 3 };
  a = await startTestServer(shared);
  b = await startTestServer(shared);
  for (const s of [a, b]) {
    expect(s.config.redisUrl).toBeUndefined();
    expect(s.config.redisClusterNodes).toEqual(cluster.addresses);
  }
  probes = cluster.nodes.map((node) => new Redis({ host: '127.0.0.1', port: node.port }));
});

afterAll(async () => {
  await Promise.allSettled([a?.close(), b?.close()]);
  await Promise.allSettled(probes.map((p) => p.quit()));
  await cluster?.stop();
});

/** Subscribers of `channel` on each master: [sharded (SSUBSCRIBE), classic (SUBSCRIBE)]. */
async function subscribers(channel: string): Promise<[number, number][]> {
  return Promise.all(
    probes.map(async (p) => {
      const shard = (await p.call('PUBSUB', 'SHARDNUMSUB', BUS_PREFIX + channel)) as [string, number];
      const classic = (await p.call('PUBSUB', 'NUMSUB', BUS_PREFIX + channel)) as [string, number];
      return [Number(shard[1]), Number(classic[1])];
    }),
  );
}

/**
 * Waits until `count` processes have SSUBSCRIBEd `channel` on the master of its slot (a publish
 * before that would be missed, repaired by a pull, and this test would not be testing the bus).
 * No other master, and no classic SUBSCRIBE, has it.
 */
async function subscribed(channel: string, count: number, timeoutMs = 5000): Promise<void> {
  const owner = cluster.nodeIndexOf(BUS_PREFIX + channel);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const counts = await subscribers(channel);
    if ((counts[owner]?.[0] ?? 0) >= count) {
      expect(counts.map(([shard, classic], i) => (i === owner ? [shard >= count, classic] : [shard, classic]))).toEqual(
        counts.map((_, i) => (i === owner ? [true, 0] : [0, 0])),
      );
      return;
    }
    if (Date.now() > deadline) throw new Error(`${channel}: ${JSON.stringify(counts)} subscribers per master, wanted ${count} on master ${owner}`);
    await delay(10);
  }
}

/** Fresh ids for one test, each on the master given (so the test crosses shards on purpose). */
function ids(...wanted: [name: string, node: number, kind: 'u' | 'c'][]): string[] {
  n++;
  return wanted.map(([name, node, kind]) => {
    for (let i = 0; ; i++) {
      const id = `${name}-${n}-${i}`;
      const key = kind === 'u' ? userKeys(prefix, id).meta : convKeys(prefix, id).meta;
      if (cluster.nodeIndexOf(key) === node) return id;
    }
  });
}

describe('two server processes over one Redis Cluster', () => {
  it('a message ingested through A is pushed (sharded pub/sub) to a client connected to B', async () => {
    // The conversation, the recipient and the sender each on a different master.
    const [dm, alice, bob] = ids(['dm', 0, 'c'], ['alice', 1, 'u'], ['bob', 2, 'u']) as [string, string, string];
    await a.members(dm, { add: [alice, bob] });
    const onB = await b.client(alice, { binary: true });
    await subscribed(userChannel(alice), 1);

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
    const [dm, alice, bob] = ids(['dm', 2, 'c'], ['alice', 0, 'u'], ['bob', 1, 'u']) as [string, string, string];
    await a.members(dm, { add: [alice, bob] });
    await b.post([
      { conv: dm, seq: 1, sender: bob },
      { conv: dm, seq: 2, sender: bob },
    ]);
    const onA = await a.client(alice);
    const onB = await b.client(alice, { binary: true });
    await subscribed(userChannel(alice), 2);
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

  it("a large group's head published through A reaches members on B, on the group's own shard", async () => {
    const [big, alice, bob, carol, dave, erin] = ids(
      ['big', 1, 'c'],
      ['alice', 0, 'u'],
      ['bob', 2, 'u'],
      ['carol', 0, 'u'],
      ['dave', 1, 'u'],
      ['erin', 2, 'u'],
    ) as [string, string, string, string, string, string];
    await a.members(big, { add: [alice, bob, carol, dave] });
    const carolOnB = await b.client(carol);
    const erinOnB = await b.client(erin, { binary: true });
    // B follows the group because carol is online there; the group's channel is on master 1.
    await subscribed(convChannel(big), 1);
    await subscribed(userChannel(erin), 1);

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
