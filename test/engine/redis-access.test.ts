import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { createEngine } from '../../server/engine/create-engine.js';
import type { Engine } from '../../server/engine/engine.js';
import { startRedisCluster } from '../helpers/redis-cluster.js';
import { startSentinel } from '../helpers/redis-sentinel.js';
import { makeTlsFiles } from '../helpers/tls-certs.js';
import { join, message } from './conformance-helpers.js';

/**
 * Password, ACL user and TLS, from the environment as an operator gives them, for Sentinel (its
 * data nodes and the Sentinels themselves) and for a Redis Cluster: the engine connects, writes
 * and reads; a wrong password is refused at start with a clear error. Certificates are made by
 * the test (tls-certs.ts); Debian's redis-server is built with TLS.
 */
const PASSWORD = 'redpoint-test-secret';
const CREDENTIALS = { REDPOINT_API_KEY: 'k'.repeat(32), REDPOINT_JWT_SECRET: 's'.repeat(32) };
let tls: Awaited<ReturnType<typeof makeTlsFiles>>;
beforeAll(async () => {
  tls = await makeTlsFiles();
});
afterAll(async () => {
  await tls?.remove();
});

async function engineFrom(env: Record<string, string>): Promise<Engine> {
  const config = loadConfig({ ...CREDENTIALS, ...env });
  return createEngine({
    redisUrl: config.redisUrl,
    redisClusterNodes: config.redisClusterNodes,
    redisSentinels: config.redisSentinels,
    redisSentinelMaster: config.redisSentinelMaster,
    redisAccess: config.redisAccess,
    snapshotEvery: 3,
    streamMaxLen: 50,
    allowEviction: true,
  });
}

async function writesAndReads(engine: Engine): Promise<void> {
  try {
    await engine.applyUserOps([join('u', 'c', 0, 'group'), message('u', 'c', 1), message('u', 'c', 2)]);
    expect((await engine.userState('u')).states.find((s) => s.conv === 'c')?.lastSeq).toBe(2);
  } finally {
    await engine.close();
  }
}

describe('Redis credentials and TLS', () => {
  it('Sentinel: ACL user on the data nodes, a password on the Sentinels; a wrong password is refused', async () => {
    const d = await startSentinel({ replicas: 1, username: 'redpoint', password: PASSWORD, sentinelPassword: `${PASSWORD}-s` });
    try {
      const env = { REDIS_SENTINELS: d.sentinelList, REDIS_USERNAME: 'redpoint', REDIS_PASSWORD: PASSWORD, REDIS_SENTINEL_PASSWORD: `${PASSWORD}-s` };
      await writesAndReads(await engineFrom(env));
      await expect(engineFrom({ ...env, REDIS_PASSWORD: 'wrong' })).rejects.toThrow(/WRONGPASS|invalid username-password|cannot connect/i);
    } finally {
      await d.stop();
    }
  });

  it('Sentinel over TLS (data nodes, replication and Sentinels), with a password', async () => {
    const d = await startSentinel({ replicas: 1, password: PASSWORD, tls });
    try {
      await writesAndReads(await engineFrom({ REDIS_SENTINELS: d.sentinelList, REDIS_PASSWORD: PASSWORD, REDIS_TLS: 'true', REDIS_TLS_CA_FILE: tls.ca }));
    } finally {
      await d.stop();
    }
  });

  it('Cluster: ACL user and password; over TLS (clients, replication and the bus) with a password', async () => {
    const acl = await startRedisCluster({ masters: 3, username: 'redpoint', password: PASSWORD });
    try {
      const env = { REDIS_CLUSTER_NODES: acl.seeds, REDIS_USERNAME: 'redpoint', REDIS_PASSWORD: PASSWORD };
      await writesAndReads(await engineFrom(env));
      await expect(engineFrom({ ...env, REDIS_PASSWORD: 'wrong' })).rejects.toThrow();
    } finally {
      await acl.stop();
    }
    const secure = await startRedisCluster({ masters: 3, password: PASSWORD, tls });
    try {
      await writesAndReads(await engineFrom({ REDIS_CLUSTER_NODES: secure.seeds, REDIS_PASSWORD: PASSWORD, REDIS_TLS: '1', REDIS_TLS_CA_FILE: tls.ca }));
    } finally {
      await secure.stop();
    }
  });
});
