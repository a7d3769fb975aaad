import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoggedServer, startLoggedServer } from '../helpers/logged-server.js';
import { TEST_API_KEY } from '../helpers/test-server.js';

/**
 * A client that goes away in the middle of its upload (a phone losing its network) is the
 * client's event, not the server's failure: it was logged at error level with a stack and counted
 * as `500 internal`, which trips 5xx alerts (issue 45, 4). It is counted under status 499 (nginx's
 * "client closed request") and logged at info.
 */
describe('an upload the client aborts', () => {
  let s: LoggedServer;
  beforeAll(async () => {
    s = await startLoggedServer({});
  });
  afterAll(async () => {
    await s?.close();
  });

  it('is counted as 499, logged at info without a stack, and is no internal error', async () => {
    const port = Number(new URL(s.url).port);
    const since = s.lines.length;
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        // Authorized, so the server reads the body; a tenth of it arrives, then the connection drops.
        socket.write(
          `POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"conv":"c","seq":1,`,
          () => {
            socket.destroy();
            resolve();
          },
        );
      });
      socket.on('error', reject);
    });
    const line = await s.waitLog((l) => l.event === 'request_aborted', 5_000, since);
    expect(line).toMatchObject({ level: 30, method: 'post', url: '/v1/messages' });
    expect(line.err).toBeUndefined();
    expect(s.lines.slice(since).filter((l) => l.level >= 50)).toEqual([]);
    const metrics = await s.metrics();
    expect(metrics).toMatch(/^redpoint_http_requests_total\{route="\/v1\/messages",status="499"\} 1$/m);
    expect(metrics).not.toMatch(/^redpoint_http_requests_total\{[^}]*status="500"/m);
    expect(metrics).not.toMatch(/^redpoint_errors_total\{code="internal"\}/m);
  });
});
