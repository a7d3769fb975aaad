import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.js';
import { startTestServer, TEST_API_KEY, TEST_JWT_SECRET, type TestServer } from '../helpers/test-server.js';
import { type JwksServer, jwksOf, makeKey, startJwksServer, type TestKey } from './keys.js';

/**
 * Auth failures that are recoverable must not be answered with a permanent code: a token from an
 * identity provider whose clock runs a little ahead (REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS), and an
 * unknown kid while the key set cannot be reloaded (503 / 1013, as PROTOCOL.md documents).
 */
const secret = new TextEncoder().encode(TEST_JWT_SECRET);
const now = () => Math.floor(Date.now() / 1000);

function token(claims: { nbf?: number; iat?: number; exp: number }): Promise<string> {
  const jwt = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice').setExpirationTime(claims.exp);
  if (claims.iat !== undefined) jwt.setIssuedAt(claims.iat);
  if (claims.nbf !== undefined) jwt.setNotBefore(claims.nbf);
  return jwt.sign(secret);
}

const open: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((x) => ('close' in x ? x.close() : x.stop())));
});

async function status(server: TestServer, t: string): Promise<{ status: number; code?: string }> {
  const res = await server.request<{ error?: { code: string } }>('GET', '/v1/users/alice/unread', { auth: { bearer: t } });
  return { status: res.status, ...(res.body?.error ? { code: res.body.error.code } : {}) };
}

describe('clock tolerance', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('a token minted by a clock 2 s ahead (nbf, iat in the future) is accepted, over HTTP and WebSocket', async () => {
    const t = now();
    const ahead = await token({ nbf: t + 2, iat: t + 2, exp: t + 600 });
    expect(await status(server, ahead)).toEqual({ status: 200 });
    const ws = await server.client('alice', { token: ahead });
    expect(ws.welcome?.uid).toBe('alice');
    await ws.close();
  });

  it('a token that expired 2 s ago is still within the tolerance; one far past it is token_expired', async () => {
    const t = now();
    expect(await status(server, await token({ iat: t - 60, exp: t - 2 }))).toEqual({ status: 200 });
    expect(await status(server, await token({ iat: t - 600, exp: t - 60 }))).toEqual({ status: 401, code: 'token_expired' });
  });

  it('nbf far ahead is still refused', async () => {
    const t = now();
    expect(await status(server, await token({ nbf: t + 120, exp: t + 600 }))).toEqual({ status: 401, code: 'unauthorized' });
  });

  it('REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS: 5 by default, 0 to 300, validated at start', () => {
    const production = { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET };
    expect(loadConfig(production).jwtClockToleranceSeconds).toBe(5);
    expect(loadConfig({ ...production, REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS: '0' }).jwtClockToleranceSeconds).toBe(0);
    expect(() => loadConfig({ ...production, REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS: '301' })).toThrow(/REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS/);
    expect(() => loadConfig({ ...production, REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS: 'a bit' })).toThrow(/REDPOINT_JWT_CLOCK_TOLERANCE_SECONDS/);
  });

  it('with tolerance 0, nbf 2 s ahead is refused (the setting is what decides)', async () => {
    const strict = await startTestServer({ config: { jwtClockToleranceSeconds: 0 } });
    open.push(strict);
    const t = now();
    expect(await status(strict, await token({ nbf: t + 3, exp: t + 600 }))).toEqual({ status: 401, code: 'unauthorized' });
  });
});

describe('unknown kid while the key set cannot be reloaded', () => {
  let es: TestKey;
  let next: TestKey;
  let keys: JwksServer;
  beforeAll(async () => {
    [es, next] = await Promise.all([makeKey('ES256', 'es-1'), makeKey('ES256', 'es-2')]);
  });

  it('answers 503 (WebSocket 1013) inside the reload back-off, not 401; known kids keep working', async () => {
    keys = await startJwksServer(jwksOf(es));
    open.push(keys);
    // Long back-off: every request after the first failed reload falls inside it.
    const server = await startTestServer({ config: { jwtSecret: undefined, jwks: { url: keys.url, timing: { cooldownMs: 0, retryMs: 60_000 } } } });
    open.push(server);
    expect(await status(server, await es.sign('alice'))).toEqual({ status: 200 });
    keys.serve(null);
    // The first unknown kid tries the reload, which fails: 503.
    expect(await status(server, await next.sign('alice'))).toEqual({ status: 503, code: 'unavailable' });
    const fetches = keys.fetches;
    // Inside the back-off no reload is tried, and the server still cannot tell: 503 again.
    for (let i = 0; i < 3; i++) expect(await status(server, await next.sign('alice'))).toEqual({ status: 503, code: 'unavailable' });
    expect(keys.fetches).toBe(fetches);
    const ws = await server.client('alice', { token: await next.sign('alice'), hello: false });
    ws.hello();
    expect((await ws.waitClose()).code).toBe(1013);
    expect(await status(server, await es.sign('alice'))).toEqual({ status: 200 });
  });

  it('inside the cooldown after a successful load, an unknown kid is refused 401 (the keys are fresh)', async () => {
    keys = await startJwksServer(jwksOf(es));
    open.push(keys);
    const server = await startTestServer({ config: { jwtSecret: undefined, jwks: { url: keys.url, timing: { cooldownMs: 60_000, retryMs: 0 } } } });
    open.push(server);
    expect(await status(server, await es.sign('alice'))).toEqual({ status: 200 });
    expect(await status(server, await next.sign('alice'))).toEqual({ status: 401, code: 'unauthorized' });
  });
});
