import { afterEach } from 'vitest';
import type { EngineKind } from '../../server/engine/engine.js';
import { fileFixture } from './file-fixture.js';
import { startRedisServer } from './redis-server.js';
import { startTestServer, type TestServer, type TestServerOptions } from './test-server.js';

/**
 * Servers on one engine, each started by a test and closed after it; on Redis they share one
 * redis-server for the whole file. Call inside a `describe` (it registers the `afterEach`).
 */
export function serversPerTest(engine: EngineKind): (options?: Omit<TestServerOptions, 'engine' | 'redis'>) => Promise<TestServer> {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  return async (options = {}) => {
    const s = await startTestServer({ engine, ...options, ...(engine === 'redis' ? { redis: redis() } : {}) });
    servers.push(s);
    return s;
  };
}
