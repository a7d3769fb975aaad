import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig } from '../../server/config.js';
import { SERVER_V8_FLAGS } from '../../server/v8-flags.js';
import { spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

describe('operations settings', () => {
  it('STORE_TIMEOUT_MS, OPS_PORT and REDIS_ALLOW_EVICTION: defaults, values, and bad values named', () => {
    expect(loadConfig({})).toMatchObject({ storeTimeoutMs: 2000, opsPort: undefined, redisAllowEviction: false });
    expect(loadConfig({ STORE_TIMEOUT_MS: '500', OPS_PORT: '9090', REDIS_ALLOW_EVICTION: '1' })).toMatchObject({
      storeTimeoutMs: 500,
      opsPort: 9090,
      redisAllowEviction: true,
    });
    expect(loadConfig({ REDIS_ALLOW_EVICTION: 'true' }).redisAllowEviction).toBe(true);
    expect(loadConfig({ REDIS_ALLOW_EVICTION: 'false' }).redisAllowEviction).toBe(false);
    const bad = (): unknown => loadConfig({ STORE_TIMEOUT_MS: '50', OPS_PORT: '70000', REDIS_ALLOW_EVICTION: 'maybe' });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/OPS_PORT: .*\n.*STORE_TIMEOUT_MS: .*\n.*REDIS_ALLOW_EVICTION: /);
  });

  it('the effective configuration for the startup line masks the secrets and the Redis password', () => {
    const shown = describeConfig(
      loadConfig({ REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET, REDIS_URL: 'redis://user:hunter2@redis.internal:6380/1' }),
    );
    const text = JSON.stringify(shown);
    for (const secret of [TEST_API_KEY, TEST_JWT_SECRET, 'hunter2']) expect(text).not.toContain(secret);
    expect(shown).toMatchObject({ apiKey: `*** (${TEST_API_KEY.length} chars)`, redis: 'redis://***@redis.internal:6380/1', storeTimeoutMs: 2000 });
  });

  it('the startup line shows the limits that decide what is refused, so an operator can see which are in effect', () => {
    expect(describeConfig(loadConfig({}))).toMatchObject({
      maxSeqJump: 100_000,
      seqJumpAction: 'refuse',
      maxReadAhead: 1000,
      maxConversationsPerUser: 10_000,
      reconcileEverySeconds: 0,
    });
    expect(
      describeConfig(loadConfig({ MAX_SEQ_JUMP: '0', SEQ_JUMP_ACTION: 'warn', MAX_READ_AHEAD: '5', MAX_CONVERSATIONS_PER_USER: '20', RECONCILE_EVERY: '60' })),
    ).toMatchObject({ maxSeqJump: 0, seqJumpAction: 'warn', maxReadAhead: 5, maxConversationsPerUser: 20, reconcileEverySeconds: 60 });
  });

  it('the process logs one short startup line first (version, how to read the logs), then that configuration', async () => {
    const server = await spawnServer({ STORE_TIMEOUT_MS: '1500' });
    try {
      const startup = server.lines().filter((l) => l.event === 'startup');
      expect(startup).toHaveLength(1);
      expect(startup[0]).toMatchObject({ version: pkg.version });
      expect(server.lines()[0]).toBe(startup[0]);
      expect(JSON.stringify(startup[0]).length).toBeLessThan(300);
      expect(String(startup[0]?.msg)).toContain('pino-pretty');
      // Which native uWebSockets.js build loaded, and from where.
      expect(server.lines().find((l) => l.event === 'uws')).toMatchObject({ build: expect.any(String), path: expect.stringMatching(/uws_.*\.node$/) });
      const config = server.lines().filter((l) => l.event === 'config');
      expect(config).toHaveLength(1);
      expect(config[0]).toMatchObject({
        config: { storeTimeoutMs: 1500, port: 0, opsPort: null, apiKey: `*** (${TEST_API_KEY.length} chars)` },
      });
      expect(server.output()).not.toContain(TEST_JWT_SECRET);
      // Started without the V8 flags the Dockerfile and npm start pass: said so, by name.
      expect(server.lines().filter((l) => l.event === 'v8_flags_missing')).toMatchObject([{ level: 40, missing: [...SERVER_V8_FLAGS] }]);
    } finally {
      await server.stop();
    }
  });

  it('started as the Dockerfile and npm start do (with the V8 flags), there is no such warning', async () => {
    const server = await spawnServer({}, { command: { file: process.execPath, args: [...SERVER_V8_FLAGS, '--import', 'tsx', 'server/main.ts'] } });
    try {
      expect(server.lines().find((l) => l.event === 'startup')).toBeDefined();
      expect(server.lines().filter((l) => l.event === 'v8_flags_missing')).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it('the Dockerfile and the start scripts put the V8 flags on the node command line', () => {
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    const cmd = dockerfile.split('\n').find((line) => line.startsWith('CMD '));
    const scripts = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(cmd).toContain(`["node", ${SERVER_V8_FLAGS.map((f) => `"${f}"`).join(', ')}, `);
    expect(scripts.start).toContain(`exec node ${SERVER_V8_FLAGS.join(' ')} `);
    expect(scripts['start:prod']).toContain(`exec node ${SERVER_V8_FLAGS.join(' ')} `);
  });
});
