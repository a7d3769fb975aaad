import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer } from '../helpers/test-server.js';
import { busPrefix, twoProcessSuite } from './multi-process-suite.js';

/**
 * Two Redpoint processes of one deployment (two `startServer`s here, one key prefix) on a private
 * redis-server: the Redis engine for state AND its notifications (PUBLISH inside the scripts,
 * SUBSCRIBE per process). The scenarios are in multi-process-suite.ts.
 */
twoProcessSuite('two server processes over one Redis', async (defer) => {
  const redis = await startRedisServer();
  defer(() => redis.stop());
  const shared = { engine: 'redis' as const, redis, redisPrefix: `mp${process.pid}`, largeGroupThreshold: 3 };
  const a = await startTestServer(shared);
  defer(() => a.close());
  const b = await startTestServer(shared);
  defer(() => b.close());
  expect(a.config.redisUrl).toBe(redis.url);
  expect(b.config.redisUrl).toBe(redis.url);
  const probe = new Redis(redis.url);
  defer(() => probe.quit());

  /** Waits until Redis reports `count` processes SUBSCRIBEd to `channel` (PUBSUB NUMSUB). */
  async function subscribed(channel: string, count: number, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reply = (await probe.call('PUBSUB', 'NUMSUB', busPrefix(shared.redisPrefix) + channel)) as [string, number];
      if (Number(reply[1]) >= count) return;
      if (Date.now() > deadline) throw new Error(`${channel}: ${reply[1]} subscribers, wanted ${count}`);
      await delay(10);
    }
  }

  return { a, b, subscribed };
});
