import { afterAll, beforeAll } from 'vitest';
import { freePort } from '../helpers/processes.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { conversations, createConversations, IngestLoad, type LoadConversation } from './ingest-load.js';

/**
 * A chaos test's own bound: it starts one or two servers (each took up to 21 s to listen at load
 * average 13: tsx compiles first) and waits out a fault; 60 s was exceeded there.
 */
export const CHAOS_TEST_MS = 180_000;

/** A server that a later one can take over (same port, same env), with conversations and a load ready. */
export interface TakeoverSetup {
  server: ServerProcess;
  /** PORT and the caller's settings: spawn(env) starts the process that takes over. */
  env: Record<string, string>;
  url: string;
  convs: LoadConversation[];
  /** An ingest load over `convs`, not started; its workers retry until acknowledged. */
  load: IngestLoad;
}

export interface ChaosFixture {
  /** The file's redis-server, AOF `always`: whatever Redis acknowledged survives its crash. */
  redis(): RedisServer;
  /** A Redpoint process on that Redis (`env` adds to REDIS_URL), stopped after the file. */
  spawn(env?: Record<string, string>): Promise<ServerProcess>;
  /** A process on a port of its own, `count` conversations made on it (tagged `tag`), and `workers` load workers over them. */
  takeoverSetup(options: { tag: string; count: number; workers: number; env?: Record<string, string> }): Promise<TakeoverSetup>;
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
  const spawn = async (env: Record<string, string> = {}): Promise<ServerProcess> => {
    const server = await spawnServer({ REDIS_URL: running().url, ...env });
    servers.push(server);
    return server;
  };
  return {
    redis: running,
    spawn,
    async takeoverSetup({ tag, count, workers, env = {} }) {
      const port = await freePort();
      const own = { ...env, PORT: String(port) };
      const server = await spawn(own);
      const url = `http://127.0.0.1:${port}`;
      const convs = conversations(count, tag);
      await createConversations(url, convs);
      return { server, env: own, url, convs, load: new IngestLoad(() => url, convs, workers) };
    },
  };
}
