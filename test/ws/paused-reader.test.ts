import type { Socket as NetSocket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

const BACKPRESSURE = 64 * 1024;
/** Pulls sent per wave: no more than a connection may have in flight. */
const WAVE = 16;
/** Enough waves of ~75 KB snapshots to fill the kernel's loopback buffers many times over. */
const MAX_WAVES = 40;

interface Frame {
  t: string;
  id?: number;
  code?: string;
  [key: string]: unknown;
}

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** The value of a prom-client counter for one label set (0 when never incremented). */
async function counter(s: TestServer, name: 'framesOut' | 'closes', labels: Record<string, string>): Promise<number> {
  const metric = await s.server.metrics[name].get();
  return metric.values
    .filter((v) => Object.entries(labels).every(([k, want]) => (v.labels as Record<string, unknown>)[k] === want))
    .reduce((n, v) => n + v.value, 0);
}

describe('a client that stops reading while it sends requests', () => {
  it('gets exactly one reply to every request, or a 4010 close once it reads again, never a silent drop', async () => {
    const s = await startTestServer({
      largeGroupThreshold: 500,
      snapshotEvery: 1000,
      streamMaxLen: 100_000,
      ws: { maxBackpressureBytes: BACKPRESSURE, versionEverySeconds: 3600, framesPerSecond: 10_000, framesBurst: 10_000 },
    });
    server = s;
    // 500 conversations: every pull without a cursor is a ~75 KB snapshot.
    const convs = Array.from({ length: 500 }, (_, i) => `conv-with-a-longish-name-${i}`);
    await Promise.all(convs.map((conv) => s.members(conv, { add: ['alice', 'bob'], category: 'group' })));
    const token = await s.token('alice');

    const frames: Frame[] = [];
    const ws = new WebSocket(s.wsUrl);
    ws.on('message', (data) => frames.push(JSON.parse(String(data)) as Frame));
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(JSON.stringify({ t: 'hello', token }));
    while (!frames.some((f) => f.t === 'sync')) await delay(5);

    const raw = (ws as unknown as { _socket: NetSocket })._socket;
    raw.pause();
    let sent = 0;
    let decided = false;
    for (let wave = 0; wave < MAX_WAVES && !decided; wave++) {
      const answeredBefore = await counter(s, 'framesOut', { type: 'sync' });
      for (let i = 0; i < WAVE; i++) ws.send(JSON.stringify({ t: 'pull', id: ++sent }));
      // The server answered the wave (into its buffers), or decided to close the connection;
      // bounded by its own deadline, so a server that does neither fails with a reason.
      const waveBy = Date.now() + 15_000;
      for (;;) {
        decided = (await counter(s, 'closes', { reason: 'slow_consumer' })) > 0;
        if (decided || (await counter(s, 'framesOut', { type: 'sync' })) >= answeredBefore + WAVE) break;
        if (Date.now() > waveBy) throw new Error(`wave ${wave}: neither answered nor closed within 15 s`);
        await delay(5);
      }
    }
    raw.resume();

    // Once the client reads again, every request has its reply, or the close comes (after
    // everything buffered before it), with 4010.
    const outcome = await Promise.race([
      closed.then((code) => ({ closed: code })),
      (async () => {
        for (;;) {
          const answered = new Set(frames.filter((f) => f.id !== undefined).map((f) => f.id));
          if (answered.size === sent) return { answeredAll: true };
          await delay(10);
        }
      })(),
      delay(15_000).then(() => ({ timedOut: true })),
    ]);
    const replies = frames.filter((f) => f.id !== undefined);
    const ids = replies.map((f) => f.id);
    expect(new Set(ids).size, 'no request is answered twice').toBe(ids.length);
    expect(outcome, `${replies.length} of ${sent} requests answered`).not.toHaveProperty('timedOut');
    if ('closed' in outcome) expect(outcome.closed).toBe(4010);
    expect(decided, 'the kernel buffers were filled: the server had to decide').toBe(true);
    expect(replies.every((f) => f.t === 'sync' || (f.t === 'error' && f.code === 'rate_limited'))).toBe(true);
    ws.terminate();
  }, 60_000);
});
