import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { errorReason } from '../../bench/lib/failures.js';
import { HttpTarget } from '../../bench/lib/http.js';
import { SYSTEMS, startSystem } from '../../bench/systems.js';

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok';

/** A raw TCP server: `onRequest(socket, n)` is called for the n-th request (1-based) on each connection. */
async function rawServer(onRequest: (socket: Socket, n: number) => void): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => {
    let n = 0;
    socket.on('data', (chunk) => {
      // One small request per chunk is enough here (the client sends them one at a time).
      if (chunk.includes('\r\n\r\n')) onRequest(socket, ++n);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

describe('bench HttpTarget', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });

  it('resends a request whose reused connection is reset before any byte of the reply', async () => {
    // The second request on a connection meets a reset: what a client sees when the server closed
    // the idle connection as the request went out.
    const { server, port } = await rawServer((socket, n) => (n === 1 ? socket.write(OK) : socket.resetAndDestroy()));
    const http = new HttpTarget(port);
    cleanup.push(() => {
      http.close();
      server.close();
    });
    expect((await http.send('POST', '/v1/messages', { conv: 'c', seq: 1, sender: 'a' })).status).toBe(200);
    expect((await http.send('POST', '/v1/messages', { conv: 'c', seq: 2, sender: 'a' })).status).toBe(200);
    expect(http.resent).toBe(1);
  });

  it('does not resend when a new connection is reset, and says where it failed', async () => {
    const { server, port } = await rawServer((socket) => socket.resetAndDestroy());
    const http = new HttpTarget(port);
    cleanup.push(() => {
      http.close();
      server.close();
    });
    const err = await http.send('POST', '/v1/messages', { conv: 'c', seq: 1, sender: 'a' }).catch((e: unknown) => e);
    expect(errorReason(err)).toBe('ECONNRESET (new socket, no reply byte)');
    expect(http.resent).toBe(0);
  });

  it('closes idle pooled connections before uWebSockets.js does: no reset after a stall across its idle close', async () => {
    // uWS closes an idle HTTP connection 8-12 s after its last request. Fill the pool, then block
    // this event loop (a load generator's stall) across that window, so the server's closes land
    // unread; a burst right after would reuse those connections and be reset. The client must
    // have dropped them itself by then (FREE_SOCKET_TIMEOUT_MS).
    const system = await startSystem(SYSTEMS['uws-raw']);
    try {
      const burst = (): Promise<string[]> =>
        Promise.all(Array.from({ length: 16 }, () => system.http.send('GET', '/healthz').then((r) => String(r.status), errorReason)));
      expect(await burst()).toEqual(Array(16).fill('200'));
      const last = performance.now();
      await delay(7000);
      while (performance.now() - last < 13_000) {
        // blocked: nothing runs in this process
      }
      expect(await burst()).toEqual(Array(16).fill('200'));
      expect(system.http.resent).toBe(0);
    } finally {
      await system.stop();
    }
  }, 45_000);
});
