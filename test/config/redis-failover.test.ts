import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, workerCount } from '../../server/config.js';
import { describeRedisTarget, redisTargetOf } from '../../server/redis-target.js';

/** REDIS_SENTINELS, credentials and TLS of Sentinel and Cluster connections, REDIS_WAIT_REPLICAS: read, checked, described. */
const CREDS = { REDPOINT_API_KEY: 'k'.repeat(32), REDPOINT_JWT_SECRET: 's'.repeat(32) };
const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('failover configuration', () => {
  it('REDIS_SENTINELS and REDIS_SENTINEL_MASTER make a Sentinel target (default name mymaster), counted as Redis', () => {
    const config = loadConfig({ ...CREDS, REDIS_SENTINELS: '10.0.0.1:26379, [::1]:26380' });
    const target = redisTargetOf(config);
    expect(target?.sentinel).toEqual({
      name: 'mymaster',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
    });
    expect(target && describeRedisTarget(target)).toBe('sentinel mymaster@10.0.0.1:26379,[::1]:26380');
    expect(redisTargetOf(loadConfig({ ...CREDS, REDIS_SENTINELS: 'h:1', REDIS_SENTINEL_MASTER: 'orders' }))?.sentinel?.name).toBe('orders');
    expect(workerCount({ ...config, workers: 0 }, 4)).toBe(4);
  });

  it('two targets, a bad entry, a misplaced setting or a WAIT longer than the store timeout are configuration errors', () => {
    expect(() => loadConfig({ ...CREDS, REDIS_SENTINELS: 'h:1', REDIS_URL: 'redis://h:2' })).toThrow(/not two/);
    expect(() => loadConfig({ ...CREDS, REDIS_SENTINELS: 'h:1', REDIS_CLUSTER_NODES: 'h:2' })).toThrow(/not two/);
    expect(() => loadConfig({ ...CREDS, REDIS_SENTINELS: 'h' })).toThrow(/REDIS_SENTINELS: "h" is not host:port/);
    expect(() => loadConfig({ ...CREDS, REDIS_SENTINEL_MASTER: 'bad name' })).toThrow(/REDIS_SENTINEL_MASTER/);
    expect(() => loadConfig({ ...CREDS, REDIS_URL: 'redis://h:1', REDIS_PASSWORD: 'p' })).toThrow(/REDIS_PASSWORD: not used with this Redis target/);
    expect(() => loadConfig({ ...CREDS, REDIS_URL: 'redis://h:1', REDIS_TLS: 'true' })).toThrow(/REDIS_TLS/);
    expect(() => loadConfig({ ...CREDS, REDIS_CLUSTER_NODES: 'h:1', REDIS_SENTINEL_PASSWORD: 'p' })).toThrow(/REDIS_SENTINEL_PASSWORD/);
    expect(() => loadConfig({ ...CREDS, REDIS_WAIT_REPLICAS: '1' })).toThrow(/REDIS_WAIT_REPLICAS needs Redis/);
    expect(() => loadConfig({ ...CREDS, REDIS_URL: 'redis://h:1', REDIS_WAIT_REPLICAS: '-1' })).toThrow(/REDIS_WAIT_REPLICAS/);
    expect(() => loadConfig({ ...CREDS, REDIS_URL: 'redis://h:1', REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '2000' })).toThrow(
      /REDIS_WAIT_TIMEOUT_MS \(2000\) must be below STORE_TIMEOUT_MS \(2000\)/,
    );
    expect(() => loadConfig({ ...CREDS, REDIS_CLUSTER_NODES: 'h:1', REDIS_TLS_CA_FILE: '/nonexistent/ca.pem' })).toThrow(/REDIS_TLS_CA_FILE: cannot read/);
  });

  it('credentials and TLS reach the target; secrets never show in the description or the errors', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'redpoint-ca-'));
    try {
      await writeFile(join(dir, 'ca.pem'), PEM);
      const config = loadConfig({
        ...CREDS,
        REDIS_CLUSTER_NODES: 'h:1',
        REDIS_USERNAME: 'rp',
        REDIS_PASSWORD: 'hunter2-secret',
        REDIS_TLS: 'true',
        REDIS_TLS_CA_FILE: join(dir, 'ca.pem'),
        REDIS_WAIT_REPLICAS: '1',
      });
      expect(redisTargetOf(config)?.access).toEqual({ username: 'rp', password: 'hunter2-secret', tls: true, ca: PEM });
      expect(config.redisWaitReplicas).toBe(1);
      expect(config.redisWaitTimeoutMs).toBe(1_000);
      const described = JSON.stringify(describeConfig(config));
      expect(described).not.toContain('hunter2');
      expect(described).toContain('"redisWaitReplicas":1');
      let message = '';
      try {
        loadConfig({ ...CREDS, REDIS_CLUSTER_NODES: 'h:1', REDIS_PASSWORD: 'hunter2-secret', REDIS_WAIT_REPLICAS: 'many' });
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/REDIS_WAIT_REPLICAS/);
      expect(message).not.toContain('hunter2');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
