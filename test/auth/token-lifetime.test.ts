import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { startTestServer, TEST_API_KEY, TEST_JWT_SECRET, type TestServer } from '../helpers/test-server.js';

/** REDPOINT_JWT_MAX_TTL_SECONDS: a token valid for longer than the maximum is refused, however it is signed. */

const MAX = 3600;
const secret = new TextEncoder().encode(TEST_JWT_SECRET);
const now = () => Math.floor(Date.now() / 1000);

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ config: { jwtMaxTtlSeconds: MAX } });
});
afterAll(async () => {
  await server?.close();
});

function token(claims: { iat?: number; exp?: number }): Promise<string> {
  const jwt = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice');
  if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
  if (claims.exp !== undefined) jwt.setExpirationTime(claims.exp);
  return jwt.sign(secret);
}

async function answer(t: string): Promise<string> {
  const res = await server.request<{ error?: { code: string; message: string } }>('GET', '/v1/sync', { auth: { bearer: t } });
  return res.status === 200 ? 'ok' : `${res.status} ${res.body?.error?.message ?? ''}`;
}

describe('maximum token lifetime', () => {
  it('accepts a lifetime up to the maximum, refuses one beyond it (HTTP and WebSocket)', async () => {
    const t = now();
    expect(await answer(await token({ iat: t, exp: t + MAX }))).toBe('ok');
    expect(await answer(await token({ iat: t, exp: t + MAX + 60 }))).toMatch(/^401 token lifetime exceeds the maximum of 3600 s/);
    const ws = await server.client('alice', { token: await token({ iat: t, exp: t + 30 * 86_400 }), hello: false });
    ws.hello();
    expect((await ws.waitClose()).code).toBe(4002);
  });

  it('without iat, the lifetime counts from now; an iat in the future does not stretch it', async () => {
    const t = now();
    expect(await answer(await token({ exp: t + MAX - 60 }))).toBe('ok');
    expect(await answer(await token({ exp: t + MAX + 600 }))).toMatch(/^401 token lifetime/);
    expect(await answer(await token({ iat: t + 86_400, exp: t + 86_400 + 60 }))).toMatch(/^401 token lifetime/);
  });

  it('a token without exp stays refused', async () => {
    expect(await answer(await token({ iat: now() }))).toMatch(/^401/);
  });

  it('defaults to 7 days and is validated at start', () => {
    const production = { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET };
    expect(loadConfig(production).jwtMaxTtlSeconds).toBe(7 * 86_400);
    expect(loadConfig({ ...production, REDPOINT_JWT_MAX_TTL_SECONDS: '900' }).jwtMaxTtlSeconds).toBe(900);
    expect(() => loadConfig({ ...production, REDPOINT_JWT_MAX_TTL_SECONDS: '10' })).toThrow(/REDPOINT_JWT_MAX_TTL_SECONDS/);
    expect(() => loadConfig({ ...production, REDPOINT_JWT_MAX_TTL_SECONDS: 'week' })).toThrow(/REDPOINT_JWT_MAX_TTL_SECONDS/);
  });
});
