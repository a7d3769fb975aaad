import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../server/config.js';
import { parseCorsOrigins } from '../../server/cors-config.js';
import { startTestServer, TEST_API_KEY, type TestServer } from '../helpers/test-server.js';
import { send } from '../openapi/contract.js';

/** CORS_ORIGINS, header by header: off by default, an exact allow-list, or `*`; never credentials. */

const ALLOWED = 'https://app.example.com';
const OTHER = 'https://evil.example.com';

function preflight(server: TestServer, origin: string | undefined, path = '/v1/users/alice/read') {
  return send(server.port, {
    method: 'OPTIONS',
    path,
    headers: {
      ...(origin ? { origin } : {}),
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization,content-type,x-request-id',
    },
  });
}

function get(server: TestServer, path: string, origin: string, auth = true) {
  return send(server.port, { method: 'GET', path, headers: { origin, ...(auth ? { authorization: `Bearer ${TEST_API_KEY}` } : {}) } });
}

describe('CORS', () => {
  let off: TestServer;
  let list: TestServer;
  let any: TestServer;
  beforeAll(async () => {
    [off, list, any] = await Promise.all([
      startTestServer(),
      startTestServer({ config: { corsOrigins: [ALLOWED, 'http://localhost:3000'] } }),
      startTestServer({ config: { corsOrigins: '*' } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([off, list, any].map((s) => s?.close()));
  });

  it('is off by default: no preflight route (405), no CORS headers', async () => {
    expect((await preflight(off, ALLOWED)).status).toBe(405);
    const reply = await get(off, '/v1/users/alice/unread', ALLOWED);
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });

  it('an allowed origin: preflight 204 naming the origin, the methods and headers; never credentials', async () => {
    const reply = await preflight(list, ALLOWED);
    expect(reply.status).toBe(204);
    expect(reply.headers).toMatchObject({
      'access-control-allow-origin': ALLOWED,
      'access-control-allow-methods': 'GET, POST, PUT, DELETE',
      'access-control-allow-headers': 'Authorization, Content-Type, X-Request-Id',
      'access-control-max-age': '600',
      vary: 'Origin',
    });
    expect(reply.headers).not.toHaveProperty('access-control-allow-credentials');
  });

  it('replies to an allowed origin expose X-Request-Id and Retry-After, errors included', async () => {
    for (const [path, auth, status] of [
      ['/v1/users/alice/unread', true, 200],
      ['/v1/users/alice/unread', false, 401],
      ['/v1/nothing-here', true, 404],
      ['/openapi.json', false, 200],
    ] as const) {
      const reply = await get(list, path, ALLOWED, auth);
      expect(reply.status, path).toBe(status);
      expect(reply.headers, path).toMatchObject({
        'access-control-allow-origin': ALLOWED,
        'access-control-expose-headers': 'X-Request-Id, Retry-After',
        vary: 'Origin',
      });
      expect(reply.headers).not.toHaveProperty('access-control-allow-credentials');
    }
  });

  it('another origin: preflight refused (403 forbidden), replies without CORS headers but with Vary: Origin', async () => {
    for (const origin of [OTHER, 'https://app.example.com:8443', 'http://app.example.com', 'null']) {
      const reply = await preflight(list, origin);
      expect(reply.status, origin).toBe(403);
      expect(JSON.parse(reply.body.toString())).toMatchObject({ error: { code: 'forbidden', message: `origin ${origin} is not in CORS_ORIGINS` } });
      expect(reply.headers).not.toHaveProperty('access-control-allow-origin');
    }
    expect((await preflight(list, undefined)).status).toBe(403);
    const reply = await get(list, '/v1/users/alice/unread', OTHER);
    expect(reply.status).toBe(200); // the browser, not the server, withholds it from the page
    expect(reply.headers).not.toHaveProperty('access-control-allow-origin');
    expect(reply.headers.vary).toBe('Origin');
  });

  it('covers the API only: the operations endpoints get no CORS headers', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const reply = await get(list, path, ALLOWED, false);
      expect(reply.status, path).toBe(200);
      expect(reply.headers, path).not.toHaveProperty('access-control-allow-origin');
      expect((await preflight(list, ALLOWED, path)).status, path).toBe(405);
    }
  });

  it('`*`: any origin, without Vary, still never credentials', async () => {
    const pre = await preflight(any, OTHER);
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
    const reply = await get(any, '/v1/users/alice/unread', OTHER);
    expect(reply.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-expose-headers': 'X-Request-Id, Retry-After' });
    expect(reply.headers).not.toHaveProperty('vary');
    expect(reply.headers).not.toHaveProperty('access-control-allow-credentials');
  });

  it('CORS_ORIGINS takes exact origins or `*` alone, and says how to fix anything else', () => {
    expect(parseCorsOrigins(' https://app.example.com , http://localhost:3000')).toEqual(['https://app.example.com', 'http://localhost:3000']);
    expect(parseCorsOrigins('*')).toBe('*');
    expect(loadConfig({}).corsOrigins).toBeUndefined();
    expect(loadConfig({ CORS_ORIGINS: 'http://127.0.0.1:5173' }).corsOrigins).toEqual(['http://127.0.0.1:5173']);
    const refused: Array<[string, RegExp]> = [
      ['https://app.example.com/', /not an exact origin; write https:\/\/app\.example\.com/],
      ['https://App.example.com', /write https:\/\/app\.example\.com/],
      ['https://app.example.com:443', /write https:\/\/app\.example\.com/],
      ['app.example.com', /is not an origin/],
      ['*,https://app.example.com', /give it alone/],
      ['https://a.example.com,', /"" is not an origin/],
    ];
    for (const [value, message] of refused) {
      expect(() => loadConfig({ CORS_ORIGINS: value }), value).toThrow(ConfigError);
      expect(() => loadConfig({ CORS_ORIGINS: value }), value).toThrow(message);
    }
  });
});
