import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { adminInterleavingSuite } from './interleavings.js';

const redis = fileFixture('redis-server', () => startRedisServer());
let prefixes = 0;
adminInterleavingSuite('redis', async () => {
  const engine = await createRedisEngine({ url: redis().url, snapshotEvery: 4, streamMaxLen: 100, streamIdleSeconds: 0, prefix: `ail${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});
