import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { redisStore } from './stores.js';
import { toolboxSuite } from './toolbox-suite.js';

const redis = fileFixture('redis-server', () => startRedisServer());
toolboxSuite('redis', () => redisStore({ url: redis().url }));

const cluster = fileFixture('Redis Cluster', () => startRedisCluster());
toolboxSuite('redis cluster', () => redisStore({ cluster: cluster().addresses }));
