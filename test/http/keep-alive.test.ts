import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEEP_ALIVE_HINT_SECONDS } from '../../server/gateway/http.js';
import { startTestServer, TEST_API_KEY, type TestServer } from '../helpers/test-server.js';

/** What a reply's head says about its connection, over a keep-alive agent. */
function head(
  port: number,
  agent: Agent,
  method: string,
  path: string,
  body?: string,
  authorization?: string,
): Promise<{ status: number; keepAlive: string | undefined; connection: string | undefined }> {
  const headers: Record<string, string | number> = authorization ? { authorization } : {};
  if (body !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, keepAlive: res.headers['keep-alive']?.toString(), connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** PROTOCOL.md "Idle connections": the server tells keep-alive clients how long an idle connection may be reused. */
describe('HTTP keep-alive hint', () => {
  let s: TestServer;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    agent.destroy();
    await s?.close();
  });

  it('says Keep-Alive: timeout=5 on replies and errors that keep the connection, below uWS idle close of 8–12 s', async () => {
    expect(KEEP_ALIVE_HINT_SECONDS).toBeLessThan(8);
    const port = Number(new URL(s.url).port);
    for (const [method, path] of [
      ['GET', '/healthz'],
      ['GET', '/v1/nothing'],
      ['POST', '/v1/messages'],
    ] as const) {
      // The POST is authorized (and refused for its body, 400): its body is read, the connection kept.
      const reply = await head(port, agent, method, path, method === 'POST' ? '{}' : undefined, `Bearer ${TEST_API_KEY}`);
      expect(reply.status, `${method} ${path}`).not.toBe(0);
      expect(reply.keepAlive, `${method} ${path} → ${reply.status}`).toBe(`timeout=${KEEP_ALIVE_HINT_SECONDS}`);
    }
  });

  it('leaves the hint out of a reply that closes its connection', async () => {
    const port = Number(new URL(s.url).port);
    // Unauthorized: refused before its body is read, so the reply closes the connection.
    const reply = await head(port, agent, 'POST', '/v1/messages', '{"conv":"c","seq":1,"sender":"a"}');
    expect(reply.status).toBe(401);
    expect(reply.connection).toBe('close');
    expect(reply.keepAlive).toBeUndefined();
  });
});
