import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

/**
 * The badge hook end to end on a Redis Cluster: marks in each user's slot (users of several
 * slots and masters), a read-diffused group's mark in its conversation's slot, the drainer
 * probing the slots; the last event equals GET /unread and a read elsewhere lowers it.
 */
const SECRET = 'cluster-badge-secret-0123456789abcdef0123';

describe('badge hook on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let receiver: BadgeReceiver;
  let s: TestServer;

  beforeAll(async () => {
    receiver = new BadgeReceiver(SECRET);
    await receiver.start();
    cluster = await startRedisCluster();
    s = await startTestServer({
      engine: 'redis',
      redisCluster: cluster,
      largeGroupThreshold: 4,
      config: {
        badgeHook: {
          webhook: { url: receiver.url, secret: SECRET, timeoutMs: 5_000 },
          intervalMs: 200,
          attempts: 4,
          retryMs: 50,
          parkMs: 500,
          concurrency: 16,
          socketlessOnly: false,
        },
      },
    });
  }, 120_000);

  afterAll(async () => {
    await s?.close();
    await receiver?.stop();
    await cluster?.stop();
  });

  async function settled(uid: string): Promise<number> {
    return vi.waitFor(
      async () => {
        const total = (await s.unread(uid)).total;
        expect(receiver.last(uid)?.badge.total, uid).toBe(total);
        return total;
      },
      { timeout: 20_000, interval: 100 },
    );
  }

  it('delivers the latest badge of users across slots, decreases and large groups included', async () => {
    const users = Array.from({ length: 8 }, (_, i) => `cu${i}`);
    await s.members('pair', { add: users.slice(0, 3) });
    await s.members('crowd', { add: users });
    for (let seq = 1; seq <= 6; seq++) {
      await s.post({ conv: 'pair', seq, sender: 'cu0' });
      await s.post({ conv: 'crowd', seq, sender: 'cu7' });
    }
    for (const uid of users.slice(1, 7)) await settled(uid);
    expect(await settled('cu1')).toBe(12);
    expect(await settled('cu5')).toBe(6);
    await s.api('POST', '/v1/users/cu1/read', { conv: 'crowd', seq: 6 });
    expect(await settled('cu1')).toBe(6);
    expect(receiver.last('cu1')?.change.total).toBe(-6);
  });
});
