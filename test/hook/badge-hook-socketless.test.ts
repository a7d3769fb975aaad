import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { BadgeHookConfig } from '../../server/config.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { BadgeReceiver } from './receiver.js';

/**
 * BADGE_HOOK_SOCKETLESS_ONLY: no event while the user has a live WebSocket in any server process;
 * its last socket's close delivers what changed meanwhile. On Redis the socket is held by one
 * server and the marks drained by both (the presence crosses processes through the store).
 */
const SECRET = 'socketless-badge-secret-0123456789abcdef';

describe.each(['memory', 'redis'] as const)('badge hook, socket-less users only, %s engine', (engine) => {
  let redis: RedisServer | undefined;
  let receiver: BadgeReceiver;
  let servers: TestServer[] = [];

  beforeAll(async () => {
    receiver = new BadgeReceiver(SECRET);
    await receiver.start();
    const badgeHook: BadgeHookConfig = {
      webhook: { url: receiver.url, secret: SECRET, timeoutMs: 5_000 },
      intervalMs: 150,
      attempts: 4,
      retryMs: 50,
      parkMs: 500,
      concurrency: 8,
      socketlessOnly: true,
    };
    if (engine === 'redis') {
      redis = await startRedisServer();
      servers = await Promise.all([0, 1].map(() => startTestServer({ engine, redis, redisPrefix: 'sl', config: { badgeHook } })));
    } else {
      servers = [await startTestServer({ engine, config: { badgeHook } })];
    }
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await receiver?.stop();
    await redis?.stop();
  });

  it('skips a user while it has a live socket, delivers its latest badge once the socket closes', async () => {
    const s = servers[0] as TestServer;
    const holder = servers.at(-1) as TestServer;
    await s.members('room', { add: ['alice', 'bob', 'carl'] });
    // The join is a change too: alice, socket-less yet, gets its event (badge 0) first.
    await vi.waitFor(() => expect(receiver.last('alice')?.badge.total).toBe(0), { timeout: 10_000, interval: 50 });
    const alice = await holder.client('alice');
    const before = receiver.of('alice').length;
    for (let seq = 1; seq <= 5; seq++) await s.post({ conv: 'room', seq, sender: 'carl' });
    // bob has no socket: his event comes; alice's mark was looked at in the same claims.
    await vi.waitFor(() => expect(receiver.last('bob')?.badge.total).toBe(5), { timeout: 10_000, interval: 50 });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(receiver.of('alice').length).toBe(before);
    // A read on another device while the socket lives: still nothing for alice.
    await s.api('POST', '/v1/users/alice/read', { conv: 'room', seq: 2 });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(receiver.of('alice').length).toBe(before);
    await alice.close();
    await vi.waitFor(() => expect(receiver.last('alice')?.badge.total).toBe(3), { timeout: 10_000, interval: 50 });
    expect((await s.unread('alice')).total).toBe(3);
  });
});
