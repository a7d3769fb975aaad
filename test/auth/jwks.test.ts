import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportSPKI, importJWK, SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { KeySetTiming } from '../../server/auth/jwks.js';
import { ConfigError, loadConfig } from '../../server/config.js';
import { startTestServer, TEST_API_KEY, TEST_JWT_SECRET, type TestServer } from '../helpers/test-server.js';
import { type JwksServer, jwksOf, makeKey, startJwksServer, type TestKey } from './keys.js';

/**
 * User tokens signed by an identity provider's keys (ES256 and RS256, chosen by `kid`), with the
 * public keys taken from a JWKS URL served by the test or from a file: several keys at once,
 * rotation in and out, an identity provider that is down, and the checks that must not give way.
 */

let es: TestKey;
let rs: TestKey;
let next: TestKey;
let impostor: TestKey;
let dir: string;

beforeAll(async () => {
  [es, rs, next] = await Promise.all([makeKey('ES256', 'es-2026-01'), makeKey('RS256', 'rs-2026-01'), makeKey('ES256', 'es-2026-02')]);
  // Same kid and algorithm as `es`, another private key: a forgery.
  impostor = { ...(await makeKey('ES256', es.kid)), kid: es.kid };
  dir = await mkdtemp(join(tmpdir(), 'redpoint-jwks-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const open: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((x) => ('close' in x ? x.close() : x.stop())));
});

async function idp(jwks: object): Promise<JwksServer> {
  const server = await startJwksServer(jwks);
  open.push(server);
  return server;
}

/** A server verifying user tokens with `jwks` only (no shared secret), reloading at once unless told otherwise. */
async function serverWith(
  jwks: { url: string } | { file: string },
  timing: Partial<KeySetTiming> = { cooldownMs: 0, retryMs: 0 },
  extra = {},
): Promise<TestServer> {
  const server = await startTestServer({ config: { jwtSecret: undefined, jwks: { ...jwks, timing }, ...extra } });
  open.push(server);
  return server;
}

async function status(server: TestServer, token: string): Promise<{ status: number; code?: string }> {
  const res = await server.request<{ error?: { code: string } }>('GET', '/v1/users/alice/unread', { auth: { bearer: token } });
  return { status: res.status, ...(res.body?.error ? { code: res.body.error.code } : {}) };
}

const OK = { status: 200 };
const REFUSED = { status: 401, code: 'unauthorized' };

describe('user tokens verified with a JWK Set', () => {
  it('ES256 and RS256 keys at once, picked by kid, over HTTP and WebSocket', async () => {
    const keys = await idp(jwksOf(es, rs));
    const server = await serverWith({ url: keys.url });
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    expect(await status(server, await rs.sign('alice'))).toEqual(OK);
    const sync = await server.request('GET', '/v1/sync', { auth: { bearer: await rs.sign('alice') } });
    expect(sync.status).toBe(200);
    const client = await server.client('alice', { token: await es.sign('alice') });
    expect(client.framesOf('welcome')).toMatchObject([{ uid: 'alice' }]);
    // The subject still decides who may act: alice's token cannot read bob's counts.
    const other = await server.request<{ error: { code: string } }>('GET', '/v1/users/bob/unread', { auth: { bearer: await es.sign('alice') } });
    expect(other.status).toBe(403);
    expect(keys.fetches).toBe(1);
  });

  it('refuses forgeries: another key under a known kid, an unpublished kid, HS256 without a secret, algorithm confusion', async () => {
    const keys = await idp(jwksOf(es, rs));
    const server = await serverWith({ url: keys.url });
    expect(await status(server, await impostor.sign('alice'))).toEqual(REFUSED);
    expect(await status(server, await next.sign('alice'))).toEqual(REFUSED); // not published
    const hs = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(TEST_JWT_SECRET));
    expect(await status(server, hs)).toEqual(REFUSED);
    // The classic confusion: an HS256 token whose "secret" is the RSA public key, as PEM.
    const pem = await exportSPKI((await importJWK(rs.publicJwk, 'RS256')) as Parameters<typeof exportSPKI>[0]);
    const confused = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', kid: rs.kid })
      .setSubject('alice')
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(pem));
    expect(await status(server, confused)).toEqual(REFUSED);
    // The API key keeps working next to the JWK Set.
    expect((await server.request('GET', '/v1/users/alice/unread', { auth: { bearer: TEST_API_KEY } })).status).toBe(200);
    const ws = await server.client('alice', { token: await impostor.sign('alice'), hello: false });
    ws.hello();
    expect((await ws.waitClose()).code).toBe(4002);
  });

  it('rotation: a new kid is fetched when first seen; a key dropped from the set is refused once reloaded', async () => {
    const keys = await idp(jwksOf(es, rs));
    const server = await serverWith({ url: keys.url });
    const oldToken = await es.sign('alice');
    expect(await status(server, oldToken)).toEqual(OK);
    // The identity provider publishes the next key and retires `es`.
    keys.serve(jwksOf(rs, next));
    expect(await status(server, await next.sign('alice'))).toEqual(OK);
    expect(keys.fetches).toBe(2);
    expect(await status(server, oldToken)).toEqual(REFUSED);
    expect(await status(server, await rs.sign('alice'))).toEqual(OK);
  });

  it('an unknown kid reloads at most once per cooldown, so made-up kids cannot hammer the identity provider', async () => {
    const keys = await idp(jwksOf(es));
    const server = await serverWith({ url: keys.url }, { cooldownMs: 60_000, retryMs: 60_000 });
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    for (let i = 0; i < 20; i++) expect(await status(server, await es.sign('alice', {}, { kid: `made-up-${i}` }))).toEqual(REFUSED);
    expect(keys.fetches).toBe(1);
  });

  it('identity provider down: 503 until the keys were ever loaded; afterwards the known keys keep working', async () => {
    const keys = await idp(jwksOf(es));
    keys.serve(null);
    const server = await serverWith({ url: keys.url }, { cooldownMs: 0, retryMs: 0 });
    expect(await status(server, await es.sign('alice'))).toEqual({ status: 503, code: 'unavailable' });
    // Over a WebSocket, the same: not "unauthorized" (do not reconnect) but "try again later".
    const ws = await server.client('alice', { token: await es.sign('alice'), hello: false });
    ws.hello();
    expect((await ws.waitClose()).code).toBe(1013);
    keys.serve(jwksOf(es));
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    keys.serve(null);
    // Known kid: served from the loaded keys. Unknown kid: the reload fails, so the server cannot tell (503).
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    expect(await status(server, await next.sign('alice'))).toEqual({ status: 503, code: 'unavailable' });
  });

  it('stale keys reload in the background; a failed reload keeps the keys it had', async () => {
    const keys = await idp(jwksOf(es));
    const server = await serverWith({ url: keys.url }, { cooldownMs: 0, retryMs: 0, maxAgeMs: 0 });
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    keys.serve(null);
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    expect(keys.fetches).toBeGreaterThanOrEqual(2);
  });

  it('a JWKS file, reread when a token names a kid it lacks', async () => {
    const file = join(dir, 'jwks.json');
    await writeFile(file, JSON.stringify(jwksOf(es)));
    const server = await serverWith({ file });
    expect(await status(server, await es.sign('alice'))).toEqual(OK);
    await writeFile(file, JSON.stringify(jwksOf(next)));
    expect(await status(server, await next.sign('alice'))).toEqual(OK);
    expect(await status(server, await es.sign('alice'))).toEqual(REFUSED);
  });

  it('a shared secret and a JWK Set together: both kinds of token', async () => {
    const keys = await idp(jwksOf(rs));
    const server = await startTestServer({ config: { jwks: { url: keys.url } } });
    open.push(server);
    expect(await status(server, await rs.sign('alice'))).toEqual(OK);
    expect(await status(server, await server.token('alice'))).toEqual(OK);
  });

  it('issuer and audience, when configured, are required', async () => {
    const keys = await idp(jwksOf(es));
    const server = await serverWith({ url: keys.url }, undefined, { jwtIssuer: 'https://id.example.com/', jwtAudience: 'redpoint' });
    expect(await status(server, await es.sign('alice', { iss: 'https://id.example.com/', aud: ['other', 'redpoint'] }))).toEqual(OK);
    expect(await status(server, await es.sign('alice', { iss: 'https://evil.example.com/', aud: 'redpoint' }))).toEqual(REFUSED);
    expect(await status(server, await es.sign('alice', { iss: 'https://id.example.com/', aud: 'other' }))).toEqual(REFUSED);
    expect(await status(server, await es.sign('alice'))).toEqual(REFUSED);
  });
});

describe('JWK Set configuration', () => {
  const production = { REDPOINT_API_KEY: TEST_API_KEY };

  it('takes a URL (https, or http to localhost) or a file, not both', async () => {
    const file = join(dir, 'ok.json');
    await writeFile(file, JSON.stringify(jwksOf(es, rs)));
    expect(loadConfig({ ...production, REDPOINT_JWKS_URL: 'https://id.example.com/jwks.json' }).jwks).toEqual({ url: 'https://id.example.com/jwks.json' });
    expect(loadConfig({ ...production, REDPOINT_JWKS_URL: 'http://127.0.0.1:9000/jwks' }).jwks).toEqual({ url: 'http://127.0.0.1:9000/jwks' });
    expect(loadConfig({ ...production, REDPOINT_JWKS_FILE: file })).toMatchObject({ jwks: { file }, devMode: false, jwtSecret: undefined });
    expect(() => loadConfig({ ...production, REDPOINT_JWKS_URL: 'http://id.example.com/jwks.json' })).toThrow(/REDPOINT_JWKS_URL: must be https/);
    expect(() => loadConfig({ ...production, REDPOINT_JWKS_URL: 'https://a/jwks', REDPOINT_JWKS_FILE: file })).toThrow(/not both/);
  });

  it('refuses a file that is missing, not a key set, or holds private or symmetric keys', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['empty.json', { keys: [] }, /no keys/],
      ['not-a-set.json', { kty: 'EC' }, /not a JWK Set/],
      ['private.json', { keys: [{ ...es.publicJwk, d: 'c2VjcmV0' }] }, /private key material/],
      ['symmetric.json', { keys: [{ kty: 'oct', k: 'c2VjcmV0', kid: 'x' }] }, /kty must be EC or RSA/],
    ];
    for (const [name, content, message] of cases) {
      const file = join(dir, name);
      await writeFile(file, JSON.stringify(content));
      expect(() => loadConfig({ ...production, REDPOINT_JWKS_FILE: file })).toThrow(message);
    }
    expect(() => loadConfig({ ...production, REDPOINT_JWKS_FILE: join(dir, 'missing.json') })).toThrow(ConfigError);
  });
});
