import { afterAll, beforeAll } from 'vitest';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { spawnServer, type ServerProcess } from '../helpers/server-process.js';

export interface ChaosFixture {
  /** The file's redis-server, AOF `always`: whatever Redis acknowledged survives its crash. */
  redis(): RedisServer;
  /** A Redpoint process on that Redis (`env` adds to REDIS_URL), stopped after the file. */
  spawn(env?: Record<string, string>): Promise<ServerProcess>;
}

/** What every chaos file starts with: its own redis-server, and server processes cleaned up after it. */
export function chaosFixture(): ChaosFixture {
  let redis: RedisServer | undefined;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    redis = await startRedisServer({ aof: 'always' });
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await redis?.stop();
  });
  const running = (): RedisServer => {
    if (!redis) throw new Error('chaos fixture: redis-server not started');
    return redis;
  };
  return {
    redis: running,
    async spawn(env = {}) {
      const server = await spawnServer({ REDIS_URL: running().url, ...env });
      servers.push(server);
      return server;
    },
  };
}
