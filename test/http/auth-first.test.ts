import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMsgpack } from '../../protocol/codec.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/** Credentials are checked before a body is parsed, and every error reply speaks the client's format. */
describe('HTTP request handling order', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('refuses an unauthenticated request with 401 before looking at its body', async () => {
    for (const [contentType, body] of [
      ['application/json', '{"conv":'],
      ['text/plain', 'hello'],
      ['application/msgpack', '\xc1'],
    ] as const) {
      const res = await fetch(`${s.url}/v1/messages`, { method: 'POST', headers: { 'content-type': contentType }, body });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
    }
    const forged = await fetch(`${s.url}/v1/users/alice/read`, {
      method: 'POST',
      headers: { authorization: 'Bearer not-a-token', 'content-type': 'application/json' },
      body: '{"conv":',
    });
    expect(forged.status).toBe(401);
  });

  it('answers 404 and 405 in MessagePack when asked, with a request id', async () => {
    const missing = await fetch(`${s.url}/v1/nothing`, { headers: { accept: 'application/msgpack', 'x-request-id': 'req-42' } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/msgpack');
    expect(missing.headers.get('x-request-id')).toBe('req-42');
    expect(decodeMsgpack(new Uint8Array(await missing.arrayBuffer()))).toEqual({
      error: { code: 'not_found', message: 'no such endpoint: the endpoints are listed at GET /openapi.json' },
    });
    const wrongMethod = await fetch(`${s.url}/v1/messages`, { method: 'GET' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('x-request-id')).toMatch(/^r[0-9a-z]+$/);
  });
});
