import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../server/config.js';
import { describeRedisTarget, redisTargetOf } from '../../server/redis-target.js';

describe('REDIS_CLUSTER_NODES', () => {
  it('takes comma-separated host:port seed nodes (IPv6 in brackets) and selects the cluster', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b.internal:7001,[::1]:7002' });
    expect(config.redisUrl).toBeUndefined();
    expect(config.redisClusterNodes).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b.internal', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    const target = redisTargetOf(config);
    expect(target).toEqual({ cluster: config.redisClusterNodes });
    expect(target && describeRedisTarget(target)).toBe('cluster 10.0.0.1:7000,redis-b.internal:7001,[::1]:7002');
  });

  it('unset: REDIS_URL or memory, as before', () => {
    expect(loadConfig({}).redisClusterNodes).toBeUndefined();
    expect(redisTargetOf(loadConfig({}))).toBeUndefined();
    expect(redisTargetOf(loadConfig({ REDIS_URL: 'redis://u:secret@h:6380/2' }))).toEqual({ url: 'redis://u:secret@h:6380/2' });
    expect(describeRedisTarget({ url: 'redis://u:secret@h:6380/2' })).toBe('redis://***@h:6380/2');
  });

  it('refuses REDIS_URL together with REDIS_CLUSTER_NODES, at start and in code', () => {
    const both = () => loadConfig({ REDIS_URL: 'redis://127.0.0.1:7000', REDIS_CLUSTER_NODES: '127.0.0.1:7000' });
    expect(both).toThrow(ConfigError);
    expect(both).toThrow(/REDIS_URL .*REDIS_CLUSTER_NODES .*not two/);
    expect(() => redisTargetOf({ redisUrl: 'redis://x:1', redisClusterNodes: [{ host: 'x', port: 1 }] })).toThrow(/not two/);
  });

  it.each(['127.0.0.1', '127.0.0.1:0', 'h:65536', 'h:70000', 'redis://h:7000', 'h:7000,', ',', 'a b:7000', '::1:7000'])(
    'names a bad value (%j) along with the other bad variables',
    (value) => {
      let err: unknown;
      try {
        loadConfig({ REDIS_CLUSTER_NODES: value, PORT: 'x' });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(/REDIS_CLUSTER_NODES: .*host:port/);
      expect((err as Error).message).toMatch(/PORT/);
    },
  );
});
