import { EventEmitter } from 'node:events';
import type { Cluster } from 'ioredis';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { watchCluster } from '../../server/engine/redis/watch-redis.js';
import { StoreHealth } from '../../server/engine/store-health.js';
import { Metrics } from '../../server/metrics/metrics.js';

const gauge = async (metrics: Metrics): Promise<string[]> => (await metrics.registry.metrics()).split('\n').filter((l) => l.startsWith('redpoint_store_up{'));

describe('StoreHealth targets', () => {
  it('a cluster node the client drops (failover, resharding) leaves the redpoint_store_up gauge instead of staying down', async () => {
    const metrics = new Metrics();
    const health = new StoreHealth(undefined, metrics);
    // The events ioredis's Cluster emits as its node pool changes; the nodes are real (unconnected) clients.
    const cluster = new EventEmitter();
    watchCluster(health, 'engine', cluster as unknown as Cluster);
    const old = new Redis({ host: '10.0.0.1', port: 7000, lazyConnect: true });
    const promoted = new Redis({ host: '10.0.0.2', port: 7001, lazyConnect: true });
    cluster.emit('+node', old);
    cluster.emit('+node', promoted);
    old.emit('ready');
    promoted.emit('ready');
    expect(await gauge(metrics)).toEqual(['redpoint_store_up{target="engine@10.0.0.1:7000"} 1', 'redpoint_store_up{target="engine@10.0.0.2:7001"} 1']);

    old.emit('close');
    expect(await gauge(metrics)).toContain('redpoint_store_up{target="engine@10.0.0.1:7000"} 0');
    cluster.emit('-node', old);
    await new Promise((r) => setImmediate(r));
    expect(await gauge(metrics)).toEqual(['redpoint_store_up{target="engine@10.0.0.2:7001"} 1']);
    expect(health.downSince('engine@10.0.0.1:7000')).toBeUndefined();
    old.disconnect();
    promoted.disconnect();
  });
});
