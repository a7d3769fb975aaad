import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEV_API_KEY, DEV_JWT_SECRET, loadConfig } from '../../server/config.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

/**
 * Dev mode is "no credential configured at all"; production needs an API key and a way to verify
 * user tokens. And `npm run token` says so when it signs with the published dev secret.
 */

function problem(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(env)}`);
}

describe('dev mode vs production', () => {
  it('no credential at all: dev mode, the published credentials, loopback only', () => {
    expect(loadConfig({ HOST: '0.0.0.0', REDPOINT_JWT_ISSUER: 'https://id.example.com/' })).toMatchObject({
      devMode: true,
      host: '127.0.0.1',
      apiKey: DEV_API_KEY,
      jwtSecret: DEV_JWT_SECRET,
      jwtIssuer: 'https://id.example.com/',
    });
  });

  it('any credential means production, which needs both an API key and a token verifier', () => {
    expect(problem({ REDPOINT_API_KEY: TEST_API_KEY })).toMatch(
      /REDPOINT_API_KEY set, so this is production, which needs a way to verify user tokens \(REDPOINT_JWT_SECRET, REDPOINT_JWKS_URL or REDPOINT_JWKS_FILE\); set none of them for dev mode/,
    );
    expect(problem({ REDPOINT_JWT_SECRET: TEST_JWT_SECRET })).toMatch(/which needs an API key \(REDPOINT_API_KEY or REDPOINT_API_KEYS\);/);
    expect(problem({ REDPOINT_JWKS_URL: 'https://id.example.com/jwks.json' })).toMatch(/which needs an API key/);
    expect(problem({ REDPOINT_API_KEYS: `a:${TEST_API_KEY}` })).toMatch(/which needs a way to verify user tokens/);
    expect(loadConfig({ REDPOINT_API_KEYS: `a:${TEST_API_KEY}`, REDPOINT_JWKS_URL: 'https://id.example.com/jwks.json', HOST: '0.0.0.0' })).toMatchObject({
      devMode: false,
      host: '0.0.0.0',
      apiKey: undefined,
      jwtSecret: undefined,
      jwks: { url: 'https://id.example.com/jwks.json' },
    });
  });

  it('refuses the published dev secret in production, and names every problem at once', () => {
    const message = problem({ REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: DEV_JWT_SECRET, PORT: 'x', CORS_ORIGINS: 'http://a.example/' });
    expect(message).toMatch(/REDPOINT_JWT_SECRET: is the published dev secret/);
    expect(message).toMatch(/PORT/);
    expect(message).toMatch(/CORS_ORIGINS/);
    expect(message).not.toContain(DEV_JWT_SECRET);
  });
});

const run = promisify(execFile);

/** `npm run token`, as a person runs it (tsx), with only the given variables set. */
async function mint(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REDPOINT_') && !k.startsWith('REDIS_') && k !== 'CORS_ORIGINS'));
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'server/auth/mint-token.ts', ...args], { env: { ...clean, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('npm run token', () => {
  it('warns when it signs with the published dev secret, and the token verifies with it', async () => {
    const { code, stdout, stderr } = await mint(['alice'], {});
    expect(code).toBe(0);
    expect(stderr).toMatch(/WARNING: signed with the published dev secret/);
    const { payload } = await jwtVerify(stdout.trim(), new TextEncoder().encode(DEV_JWT_SECRET), { algorithms: ['HS256'] });
    expect(payload).toMatchObject({ sub: 'alice' });
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(24 * 3600);
  });

  it('with a real secret: no warning, the configured issuer and audience, and a TTL above the maximum refused', async () => {
    const env = {
      REDPOINT_API_KEY: TEST_API_KEY,
      REDPOINT_JWT_SECRET: TEST_JWT_SECRET,
      REDPOINT_JWT_ISSUER: 'https://id.example.com/',
      REDPOINT_JWT_AUDIENCE: 'redpoint',
      REDPOINT_JWT_MAX_TTL_SECONDS: '7200',
    };
    const ok = await mint(['bob', '3600'], env);
    expect(ok).toMatchObject({ code: 0, stderr: '' });
    const { payload } = await jwtVerify(ok.stdout.trim(), new TextEncoder().encode(TEST_JWT_SECRET), {
      algorithms: ['HS256'],
      issuer: 'https://id.example.com/',
      audience: 'redpoint',
    });
    expect(payload.sub).toBe('bob');
    const long = await mint(['bob', '7201'], env);
    expect(long.code).toBe(2);
    expect(long.stderr).toMatch(/exceeds REDPOINT_JWT_MAX_TTL_SECONDS \(7200\)/);
    expect(long.stdout).toBe('');
  });

  it('with public keys only there is nothing to sign with: says so', async () => {
    const res = await mint(['bob'], { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWKS_URL: 'https://id.example.com/jwks.json' });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/REDPOINT_JWT_SECRET is not set/);
  });
});
