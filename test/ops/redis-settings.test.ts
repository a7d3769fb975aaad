import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeRedisSettings } from '../../server/engine/redis/settings-check.js';
import { type LogLine, startLoggedServer } from '../helpers/logged-server.js';
import { startPostgres } from '../helpers/postgres-server.js';
import { startSentinel } from '../helpers/redis-sentinel.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { spawnServer } from '../helpers/server-process.js';

/**
 * Issue 8, item 4: Redis's settings are checked at start. No persistence is a warning that names
 * the consequence; a maxmemory-policy that evicts keys is a refusal unless explicitly allowed.
 */
async function clientCount(probe: Redis): Promise<number> {
  return String(await probe.call('CLIENT', 'LIST'))
    .trim()
    .split('\n').length;
}

/** The log lines of a server started over `env` (in process) and closed again: the settings check speaks at start. */
async function startLines(env: Record<string, string>): Promise<LogLine[]> {
  const s = await startLoggedServer(env);
  await s.close();
  return s.lines;
}

describe("Redis's settings at start", () => {
  let redis: RedisServer;
  let admin: Redis;
  beforeAll(async () => {
    redis = await startRedisServer(); // no AOF, no save points: the test fixture's default
    admin = new Redis(redis.url);
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
  });

  it('persistence off: starts, with a warning that a Redis restart resets every count', async () => {
    const warning = (await startLines({ REDIS_URL: redis.url })).find((l) => l.event === 'redis_persistence_off');
    expect(warning?.level).toBe(40);
    expect(warning?.msg).toMatch(/a Redis restart resets every count/);
    expect(warning?.node).toBe(`127.0.0.1:${redis.port}`);
    // With AOF on, nothing to say.
    await admin.config('SET', 'appendonly', 'yes');
    try {
      const quiet = await startLines({ REDIS_URL: redis.url });
      expect(quiet.filter((l) => String(l.event).startsWith('redis_'))).toEqual([]);
    } finally {
      await admin.config('SET', 'appendonly', 'no');
    }
  });

  it('persistence off under the durable tier: the warning says what a restart loses (what PostgreSQL lacks), not every count', async () => {
    const postgres = await startPostgres();
    try {
      const lines = await startLines({ REDIS_URL: redis.url, DATABASE_URL: await postgres.createDatabase('settings') });
      const warning = lines.find((l) => l.event === 'redis_persistence_off');
      expect(warning?.msg).not.toMatch(/every count/);
      expect(warning?.msg).toMatch(
        new RegExp(
          `^Redis 127\\.0\\.0\\.1:${redis.port} has no persistence .*: a Redis restart loses the changes the durable tier has not yet written to PostgreSQL`,
        ),
      );
    } finally {
      await postgres.stop();
    }
  }, 60_000);

  it('behind Sentinels, the warning names the master and the Sentinels configured, not a default address', async () => {
    const deployment = await startSentinel({ replicas: 0 });
    try {
      const master = await deployment.master();
      const lines = await startLines({ REDIS_SENTINELS: deployment.sentinelList, REDIS_SENTINEL_MASTER: deployment.name });
      const warning = lines.find((l) => l.event === 'redis_persistence_off');
      const node = `master ${deployment.name} at 127.0.0.1:${master.port} (Sentinels ${deployment.sentinelList})`;
      expect(warning?.node).toBe(node);
      expect(warning?.msg).toMatch(new RegExp(`^Redis ${node.replace(/[.()]/g, '\\$&')} has no persistence`));
    } finally {
      await deployment.stop();
    }
  }, 60_000);

  it('a maxmemory-policy that evicts keys: refuses to start (exit 1) unless REDIS_ALLOW_EVICTION is set', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const refused = await spawnServer({ REDIS_URL: redis.url }, { waitListening: false });
      expect(await refused.exited).toEqual({ code: 1, signal: null });
      const fatal = refused.lines().find((l) => l.event === 'start_failed');
      expect(fatal?.msg).toMatch(/maxmemory-policy is not noeviction on 127\.0\.0\.1:\d+ \(allkeys-lru\).*REDIS_ALLOW_EVICTION/);
      // In process, the start is refused the same way and closes the connections it opened.
      const before = await clientCount(admin);
      await expect(startLoggedServer({ REDIS_URL: redis.url })).rejects.toThrow(/maxmemory-policy/);
      const deadline = Date.now() + 5_000;
      while ((await clientCount(admin)) > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await clientCount(admin)).toBe(before);

      const allowed = await startLoggedServer({ REDIS_URL: redis.url, REDIS_ALLOW_EVICTION: 'true' });
      try {
        expect(allowed.lines.find((l) => l.event === 'redis_eviction_allowed')?.msg).toMatch(/evicted keys silently corrupt counts/);
        expect((await allowed.call('GET', '/v1/users/alice/unread')).status).toBe(200);
      } finally {
        await allowed.close();
      }
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it('judges what it could read: INFO without CONFIG (a managed Redis) still shows AOF and the policy', () => {
    const verdict = judgeRedisSettings(
      [
        { node: 'a:1', aof: true, rdb: undefined, maxmemoryPolicy: 'noeviction' },
        { node: 'b:1', aof: undefined, rdb: undefined, maxmemoryPolicy: undefined },
        { node: 'c:1', aof: false, rdb: true, maxmemoryPolicy: 'volatile-lru' },
      ],
      false,
    );
    expect(verdict.warnings.map((w) => [w.event, w.node])).toEqual([
      ['redis_settings_unchecked', 'b:1'],
      ['redis_settings_unchecked', 'b:1'],
      ['redis_persistence_rdb_only', 'c:1'],
    ]);
    expect(verdict.refusal).toMatch(/c:1 \(volatile-lru\)/);
  });
});
