import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { interleavingSuite } from './interleavings.js';

const OPTIONS = { snapshotEvery: 4, streamMaxLen: 100 };
let prefixes = 0;

const redis = fileFixture('redis-server', () => startRedisServer());
interleavingSuite('redis', async () => {
  const engine = await createRedisEngine({ url: redis().url, ...OPTIONS, prefix: `il${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});

const cluster = fileFixture('Redis Cluster', () => startRedisCluster());
interleavingSuite('redis cluster', async () => {
  const engine = await createRedisEngine({ cluster: cluster().addresses, ...OPTIONS, prefix: `ilc${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});
