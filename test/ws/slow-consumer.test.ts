import type { Socket as NetSocket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

const BACKPRESSURE = 64 * 1024;
// Enough pushes (~100 KB per round) to overflow the kernel's socket buffers on loopback.
const ROUNDS = 100;

interface Frame {
  t: string;
  [key: string]: unknown;
}

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('a client that stops reading its socket', () => {
  it('is skipped by publishes while congested, then told the version once it drains', async () => {
    const s = await startTestServer({
      largeGroupThreshold: 500,
      snapshotEvery: 100,
      streamMaxLen: 1000,
      // No periodic check during the test: a version frame can only come from the drain path.
      ws: { maxBackpressureBytes: BACKPRESSURE, versionEverySeconds: 3600, framesPerSecond: 1000, framesBurst: 1000 },
    });
    server = s;
    // 400 conversations: each ingest request below makes 400 pushes (~100 KB) to alice.
    const convs = Array.from({ length: 400 }, (_, i) => `c${i}`);
    await Promise.all(convs.map((conv) => s.members(conv, { add: ['alice', 'bob'] })));
    const token = await s.token('alice');

    const frames: Frame[] = [];
    const ws = new WebSocket(s.wsUrl);
    // Each frame looked at once (thousands arrive when the socket drains: a scan of all of them per
    // frame took longer than the wait at load 10). The wait is for an event, not a timing claim.
    const waitFor = (pred: (f: Frame) => boolean, timeoutMs = 30_000): Promise<Frame> =>
      new Promise((resolve, reject) => {
        let checked = 0;
        const next = (): Frame | undefined => {
          for (; checked < frames.length; checked++) if (pred(frames[checked] as Frame)) return frames[checked];
          return undefined;
        };
        const found = next();
        if (found) return resolve(found);
        const timer = setTimeout(() => reject(new Error('timed out waiting for a frame')), timeoutMs);
        const onMessage = (): void => {
          const hit = next();
          if (!hit) return;
          clearTimeout(timer);
          ws.off('message', onMessage);
          resolve(hit);
        };
        ws.on('message', onMessage);
      });
    ws.on('message', (data) => frames.push(JSON.parse(String(data)) as Frame));
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(JSON.stringify({ t: 'hello', token }));
    const first = await waitFor((f) => f.t === 'sync');
    expect(first.more).toBe(false);

    // Stop reading, then flood the user with pushes only (topic publishes): past the kernel
    // buffers they pile up in uWS until publishes start skipping the socket.
    const raw = (ws as unknown as { _socket: NetSocket })._socket;
    raw.pause();
    for (let seq = 1; seq <= ROUNDS; seq++) {
      await s.post(convs.map((conv) => ({ conv, seq, sender: 'bob' })));
    }
    const before = frames.length;
    await s.post({ conv: 'c7', seq: ROUNDS + 1, sender: 'bob' });

    raw.resume();
    const version = await waitFor((f) => f.t === 'version');
    expect(frames.length).toBeGreaterThan(before);
    const serverVersion = await s.unread('alice');
    expect(version.version).toBe(serverVersion.version);
    expect(serverVersion.total).toBe(ROUNDS * convs.length + 1);
    // The last pushes were skipped while the socket was congested: only the drain path tells the client.
    const lastChange = frames.filter((f) => f.t === 'change').at(-1);
    expect(lastChange?.v).toBeLessThan(serverVersion.version);
    expect(ws.readyState).toBe(WebSocket.OPEN);
    ws.close();
    // 40,000 messages ingested: over 30 s at load average 10 on 2 cores (timed out there).
  }, 120_000);
});
