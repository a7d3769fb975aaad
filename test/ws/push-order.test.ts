import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangeFrame } from '../../protocol/frames.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * Two server processes of one deployment on one Redis, ingest spread over both: a device
 * connected to one of them must get its user's pushes in version order, whichever process made
 * each change (before, the process's own changes overtook the ones coming through Redis: 5–12% of
 * pushes out of order, each costing the device a pull).
 */
const CONVS = 20;
const ROUNDS = 60;

describe('push order across two processes', () => {
  let redis: RedisServer;
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    redis = await startRedisServer();
    const shared = { engine: 'redis' as const, redis, redisPrefix: `order${process.pid}`, largeGroupThreshold: 100, snapshotEvery: 50, streamMaxLen: 5000 };
    a = await startTestServer(shared);
    b = await startTestServer(shared);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  it('a user whose changes are made by both processes gets every push in version order, none out of it', async () => {
    const convs = Array.from({ length: CONVS }, (_, i) => `o${i}`);
    await Promise.all(convs.map((conv) => a.members(conv, { add: ['alice', 'bob'] })));
    const device = await a.client('alice');
    const mark = device.mark();
    const start = (await a.position('alice')).version;
    for (let round = 1; round <= ROUNDS; round++) {
      // Both processes at once, each with half the conversations.
      await Promise.all(convs.map((conv, i) => (i % 2 === 0 ? a : b).post({ conv, seq: round, sender: 'bob' })));
    }
    const expected = CONVS * ROUNDS;
    await device.waitFor(() => device.framesSince(mark).filter((f) => f.t === 'change').length >= expected, 20_000, 'every push');
    const versions = device
      .framesSince(mark)
      .filter((f): f is ChangeFrame => f.t === 'change')
      .map((f) => f.v);
    let outOfOrder = 0;
    versions.forEach((v, i) => {
      if (v !== (i === 0 ? start : (versions[i - 1] ?? 0)) + 1) outOfOrder += 1;
    });
    console.log(`[push order] ${versions.length} pushes, ${outOfOrder} out of version order (${((100 * outOfOrder) / versions.length).toFixed(2)}%)`);
    expect(versions).toHaveLength(expected);
    expect(outOfOrder).toBe(0);
  }, 60_000);
});
