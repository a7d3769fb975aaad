import { type AddressInfo, createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/app.js';
import { loadConfig } from '../../server/config.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { silentLogger } from '../helpers/test-server.js';

async function clientCount(probe: Redis): Promise<number> {
  const list = (await probe.call('CLIENT', 'LIST')) as string;
  return list.trim().split('\n').length;
}

describe('start-up', () => {
  let redis: RedisServer;
  let probe: Redis;
  beforeAll(async () => {
    redis = await startRedisServer();
    probe = new Redis(redis.url);
  });
  afterAll(async () => {
    await probe?.quit();
    await redis?.stop();
  });

  it('a server that cannot listen rejects and closes the Redis connections it opened', async () => {
    // A plain TCP server holds the port, so every Redis client but the probe belongs to Redpoint.
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    const before = await clientCount(probe);
    await expect(startServer({ ...loadConfig({ REDIS_URL: redis.url }), port }, silentLogger)).rejects.toThrow(/cannot listen/);
    // Closed connections leave CLIENT LIST asynchronously: wait for it, bounded.
    const deadline = Date.now() + 5000;
    while ((await clientCount(probe)) > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await clientCount(probe)).toBe(before);
    await new Promise((resolve) => holder.close(resolve));
  });
});
