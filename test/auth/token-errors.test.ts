import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_CHECKS, type AuthCheck } from '../../protocol/errors.js';
import type { ErrorFrame } from '../../protocol/frames.js';
import { DEV_API_KEY, DEV_JWT_SECRET } from '../../server/auth/auth-config.js';
import { startTestServer, TEST_API_KEY, TEST_JWT_SECRET, type TestServer } from '../helpers/test-server.js';
import { jwksOf, makeKey, type TestKey } from './keys.js';

/**
 * Every credential check that can fail says which one did, over HTTP (the 401 body's `check`) and
 * over WebSocket (the `error` frame sent before the 4002/4003 close), so whoever wires up an
 * identity provider or a key learns what to fix; and no message echoes the credential.
 */

const ISSUER = 'https://id.example.com/';
const AUDIENCE = 'redpoint';
const now = (): number => Math.floor(Date.now() / 1000);

let server: TestServer;
let es: TestKey;
let dir: string;

beforeAll(async () => {
  es = await makeKey('ES256', 'es-2026-01');
  dir = await mkdtemp(join(tmpdir(), 'redpoint-token-errors-'));
  const file = join(dir, 'jwks.json');
  await writeFile(file, JSON.stringify(jwksOf(es)));
  server = await startTestServer({
    config: { jwks: { file, timing: { cooldownMs: 0, retryMs: 0 } }, jwtIssuer: ISSUER, jwtAudience: AUDIENCE },
  });
});

afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** An HS256 token; the claims a valid one has unless `claims` replaces them. */
function hs256(claims: Record<string, unknown> = {}, secret = TEST_JWT_SECRET, alg = 'HS256'): Promise<string> {
  return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'alice', iat: now(), exp: now() + 3600, ...claims })
    .setProtectedHeader({ alg })
    .sign(new TextEncoder().encode(secret));
}

interface Case {
  name: string;
  token: () => Promise<string>;
  code: 'unauthorized' | 'token_expired';
  check: AuthCheck;
  /** Text the message must contain: the fix it names. */
  says: string;
}

const CASES: Case[] = [
  {
    name: 'signed with another secret',
    token: () => hs256({}, 'another-secret-0123456789-0123456789'),
    code: 'unauthorized',
    check: 'signature',
    says: 'REDPOINT_JWT_SECRET',
  },
  { name: 'signed with the published dev secret', token: () => hs256({}, DEV_JWT_SECRET), code: 'unauthorized', check: 'signature', says: 'dev secret' },
  {
    name: 'a kid the JWK Set lacks',
    token: () => es.sign('alice', { iss: ISSUER, aud: AUDIENCE }, { kid: 'retired-kid' }),
    code: 'unauthorized',
    check: 'unknown_kid',
    says: '"retired-kid"',
  },
  { name: 'a wrong issuer', token: () => hs256({ iss: 'https://other.example.com/' }), code: 'unauthorized', check: 'issuer', says: 'REDPOINT_JWT_ISSUER' },
  { name: 'no issuer', token: () => hs256({ iss: undefined }), code: 'unauthorized', check: 'issuer', says: 'REDPOINT_JWT_ISSUER' },
  { name: 'a wrong audience', token: () => hs256({ aud: 'someone-else' }), code: 'unauthorized', check: 'audience', says: 'REDPOINT_JWT_AUDIENCE' },
  { name: 'expired', token: () => hs256({ iat: now() - 7200, exp: now() - 3600 }), code: 'token_expired', check: 'expired', says: 'fetch a new token' },
  { name: 'not yet valid', token: () => hs256({ nbf: now() + 3600 }), code: 'unauthorized', check: 'not_yet_valid', says: 'nbf' },
  { name: 'malformed', token: async () => 'abc.def.ghi', code: 'unauthorized', check: 'malformed', says: 'not a JWT' },
  { name: 'an algorithm the server does not take', token: () => hs256({}, TEST_JWT_SECRET, 'HS512'), code: 'unauthorized', check: 'algorithm', says: 'HS256' },
  { name: 'a subject that is not a user id', token: () => hs256({ sub: 'a b' }), code: 'unauthorized', check: 'claims', says: 'sub' },
  { name: 'no exp', token: () => hs256({ exp: undefined }), code: 'unauthorized', check: 'claims', says: 'exp' },
  {
    name: 'a lifetime over the maximum',
    token: () => hs256({ exp: now() + 30 * 24 * 3600 }),
    code: 'unauthorized',
    check: 'lifetime',
    says: 'REDPOINT_JWT_MAX_TTL_SECONDS',
  },
];

interface ErrorReply {
  error: { code: string; message: string; check?: string };
}

/** The checks a test below refuses a credential with (collected as the tests are declared). */
const exercised = new Set<AuthCheck>();

describe('HTTP: the 401 names the check that failed', () => {
  for (const c of CASES) {
    exercised.add(c.check);
    it(`${c.name} → ${c.code} (${c.check})`, async () => {
      const token = await c.token();
      const res = await server.request<ErrorReply>('GET', '/v1/sync', { auth: { bearer: token } });
      expect({ status: res.status, code: res.body.error.code, check: res.body.error.check }, res.text).toEqual({ status: 401, code: c.code, check: c.check });
      expect(res.body.error.message).toContain(c.says);
      expect(res.body.error.message).not.toContain(token);
    });
  }

  it('a valid token still passes every check', async () => {
    expect((await server.request('GET', '/v1/sync', { auth: { bearer: await hs256() } })).status).toBe(200);
    expect((await server.request('GET', '/v1/sync', { auth: { bearer: await es.sign('alice', { iss: ISSUER, aud: AUDIENCE }) } })).status).toBe(200);
  });
});

describe('HTTP: API keys', () => {
  const cases: Array<{ name: string; method: string; path: string; bearer: () => Promise<string> | string; check: AuthCheck; says: string }> = [
    {
      name: 'the dev API key against production',
      method: 'POST',
      path: '/v1/messages',
      bearer: () => DEV_API_KEY,
      check: 'api_key',
      says: 'published dev API key',
    },
    {
      name: 'a key that is not configured',
      method: 'POST',
      path: '/v1/messages',
      bearer: () => 'not-the-key-0123456789',
      check: 'api_key',
      says: 'REDPOINT_API_KEY',
    },
    { name: 'no credential', method: 'POST', path: '/v1/messages', bearer: () => '', check: 'missing', says: 'Authorization: Bearer' },
    {
      name: 'a user token where the API key is needed',
      method: 'POST',
      path: '/v1/messages',
      bearer: () => hs256(),
      check: 'wrong_credential',
      says: 'API key',
    },
    {
      name: 'the API key where a user token is needed',
      method: 'GET',
      path: '/v1/sync',
      bearer: () => TEST_API_KEY,
      check: 'wrong_credential',
      says: 'user token',
    },
    {
      name: 'the dev API key on a per-user endpoint',
      method: 'GET',
      path: '/v1/users/alice/unread',
      bearer: () => DEV_API_KEY,
      check: 'api_key',
      says: 'published dev API key',
    },
    {
      name: 'an unknown key on a per-user endpoint',
      method: 'GET',
      path: '/v1/users/alice/unread',
      bearer: () => 'not-the-key-0123456789',
      check: 'api_key',
      says: 'neither',
    },
  ];
  for (const c of cases) {
    exercised.add(c.check);
    it(`${c.name} → 401 (${c.check}), the key not echoed`, async () => {
      const bearer = await c.bearer();
      const res = await server.request<ErrorReply>(c.method, c.path, {
        auth: bearer === '' ? 'none' : { bearer },
        ...(c.method === 'POST' ? { body: { conv: 'x', seq: 1, sender: 'bob' } } : {}),
      });
      expect({ status: res.status, code: res.body.error.code, check: res.body.error.check }, res.text).toEqual({
        status: 401,
        code: 'unauthorized',
        check: c.check,
      });
      expect(res.body.error.message).toContain(c.says);
      if (bearer !== '') expect(res.body.error.message).not.toContain(bearer);
    });
  }
});

describe('WebSocket: the hello is refused with an error frame naming the check, then the close', () => {
  for (const c of CASES) {
    it(`${c.name} → error ${c.code} (${c.check}), close ${c.code === 'token_expired' ? 4003 : 4002}`, async () => {
      const token = await c.token();
      const ws = await server.client('alice', { hello: false });
      ws.send({ t: 'hello', token });
      const closed = await ws.waitClose();
      expect(closed.code).toBe(c.code === 'token_expired' ? 4003 : 4002);
      const errors = ws.framesOf('error') as ErrorFrame[];
      expect(errors.map((e) => ({ code: e.code, check: e.check }))).toEqual([{ code: c.code, check: c.check }]);
      expect(errors[0]?.message).toContain(c.says);
      expect(errors[0]?.message).not.toContain(token);
      expect(ws.framesOf('welcome')).toEqual([]);
    });
  }
});

describe('WebSocket: the API key is not a user', () => {
  it('the API key as the hello token → error unauthorized (wrong_credential), close 4002, the key not echoed', async () => {
    const ws = await server.client('alice', { hello: false });
    ws.send({ t: 'hello', token: TEST_API_KEY });
    expect((await ws.waitClose()).code).toBe(4002);
    const [err] = ws.framesOf('error') as ErrorFrame[];
    expect(err).toMatchObject({ code: 'unauthorized', check: 'wrong_credential' });
    expect(err?.message).toContain('user token');
    expect(err?.message).not.toContain(TEST_API_KEY);
  });
});

describe('the checks as PROTOCOL.md lists them', () => {
  it('every check of AUTH_CHECKS is one a test here refuses a credential with', () => {
    expect(Object.keys(AUTH_CHECKS).filter((check) => !exercised.has(check as AuthCheck))).toEqual([]);
  });

  it('its Credential checks table has every check of AUTH_CHECKS, each with the code it comes with', async () => {
    const text = await readFile(new URL('../../protocol/PROTOCOL.md', import.meta.url), 'utf8');
    const section = text.slice(text.indexOf('**Credential checks.**'), text.indexOf('**Request ids.**'));
    const rows = [...section.matchAll(/^\| `([a-z_]+)` \| `([a-z_]+)` \|/gm)].map((m) => [m[1], m[2]]);
    const expected = Object.keys(AUTH_CHECKS).map((check) => [check, check === 'expired' ? 'token_expired' : 'unauthorized']);
    expect(rows.sort()).toEqual(expected.sort());
  });
});
