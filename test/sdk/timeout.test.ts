import { describe, expect, it } from 'vitest';
import { REQUEST_TIMEOUT_CLOSE, type StatusEvent, type Timers } from '../../client-demo/sdk/src/index.js';
import type { ServerFrame } from '../../protocol/frames.js';
import { expectWithin } from '../helpers/bound.js';
import { sdkSuite } from './harness.js';
import { recordingTimers } from './recording-timers.js';
import { newTap, tapped } from './tap.js';
import { convergedTo, synced, unreadOf, until } from './wait.js';

/**
 * The second line of defence behind the server's "every request gets exactly one reply": a
 * request (or the hello) unanswered within `requestTimeoutMs` means the connection is broken.
 * The client closes it (4000) and reconnects with its backoff; the hello carries the cursor, so
 * the reconnect is a pull. Each test makes the real server's reply to one frame vanish on the way.
 */
const { h, client } = sdkSuite();
/** Short, so the tests are quick; long enough that a loaded machine's real replies stay well inside. */
const TIMEOUT_MS = 500;

/** A tap that swallows the first server frame `match` selects, and says when. */
function swallowing(match: (frame: ServerFrame) => boolean) {
  const swallowed: number[] = [];
  const tap = newTap((frame, deliver) => {
    if (swallowed.length === 0 && match(frame)) {
      swallowed.push(performance.now());
      return;
    }
    deliver();
  });
  return { tap, swallowed };
}

async function dm(name: string, unread: number): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`] });
  for (let seq = 1; seq <= unread; seq++) await h.post({ conv: name, seq, sender: `${name}-peer` });
}

function timedClient(uid: string, tap: ReturnType<typeof swallowing>['tap'], requestTimeoutMs = TIMEOUT_MS, timers?: Timers) {
  const c = client(uid, { WebSocket: tapped(tap), requestTimeoutMs, backoff: { baseMs: 20, maxMs: 100 }, readBatchMs: 10, ...(timers ? { timers } : {}) });
  const closes: Array<{ code: number | undefined; at: number }> = [];
  c.on('status', (e: StatusEvent) => {
    if (e.connection === 'offline') closes.push({ code: e.closeCode, at: performance.now() });
  });
  return { c, closes };
}

describe('request timeout', () => {
  it('a pull whose reply never comes: the connection is dropped (4000) and the client is SYNCED again by itself', async () => {
    await dm('t1', 2);
    const { tap, swallowed } = swallowing((f) => f.t === 'sync' && f.id !== undefined);
    const { c, closes } = timedClient('t1-me', tap);
    await c.start();
    await until(c, synced, 'first sync');
    await h.post({ conv: 't1', seq: 3, sender: 't1-peer' });
    c.refresh();
    await until(c, () => closes.length > 0, 'the connection dropped');
    expect(closes[0]?.code).toBe(REQUEST_TIMEOUT_CLOSE);
    // The deadline runs from the send, not from the reply the tap swallowed (a loaded server
    // takes a while to answer: measured from the reply, the wait looks shorter than the timeout).
    const sentAt = tap.sent.filter((x) => x.frame.t === 'pull' && x.at <= (swallowed[0] ?? 0)).at(-1)?.at ?? 0;
    expect(sentAt).toBeGreaterThan(0);
    const waited = (closes[0]?.at ?? 0) - sentAt;
    expect(waited).toBeGreaterThan(TIMEOUT_MS - 50);
    expectWithin('connection dropped after the unanswered pull', waited, TIMEOUT_MS);
    const s = await convergedTo(h, c, 't1-me');
    expect(unreadOf(s, 't1')).toBe(3);
    expect(tap.sockets).toHaveLength(2);
    const hellos = tap.sent.filter((x) => x.frame.t === 'hello').map((x) => x.frame);
    expect(hellos[1] && 'cursor' in hellos[1] ? hellos[1].cursor?.version : undefined).toBeGreaterThan(0);
  });

  it('a hello whose sync never comes', async () => {
    await dm('t2', 1);
    const { tap } = swallowing((f) => f.t === 'sync' && f.id === undefined);
    const { c, closes } = timedClient('t2-me', tap);
    await c.start();
    await until(c, () => closes.length > 0, 'the connection dropped');
    expect(closes[0]?.code).toBe(REQUEST_TIMEOUT_CLOSE);
    expect(c.state.status).toBe('NO_DATA');
    await convergedTo(h, c, 't2-me');
    expect(tap.sockets).toHaveLength(2);
  });

  it('a hello whose welcome never comes', async () => {
    await dm('t3', 1);
    const { tap } = swallowing((f) => f.t === 'welcome');
    const { c, closes } = timedClient('t3-me', tap);
    await c.start();
    await convergedTo(h, c, 't3-me');
    expect(closes.map((x) => x.code)).toEqual([REQUEST_TIMEOUT_CLOSE]);
  });

  it('a read whose ack never comes: sent again on the new connection, and it lands', async () => {
    await dm('t4', 3);
    const { tap } = swallowing((f) => f.t === 'ack');
    const { c, closes } = timedClient('t4-me', tap);
    await c.start();
    await until(c, synced, 'first sync');
    c.markRead('t4');
    await until(c, () => closes.length > 0, 'the connection dropped');
    expect(unreadOf(c.state, 't4')).toBe(0);
    await convergedTo(h, c, 't4-me');
    expect(tap.sent.filter((x) => x.frame.t === 'read')).toHaveLength(2);
    expect((await h.unread('t4-me')).total).toBe(0);
  });

  it('answered requests never trip it', async () => {
    await dm('t5', 1);
    const tap = newTap();
    const timers = recordingTimers();
    const { c, closes } = timedClient('t5-me', tap, 1000, timers);
    await c.start();
    await until(c, synced, 'first sync');
    for (let i = 0; i < 5; i++) {
      c.refresh();
      await until(c, synced, 'the pull answered');
    }
    c.markRead('t5');
    await convergedTo(h, c, 't5-me');
    // Every request deadline (1000 ms timers) was cleared by its reply and none is left to fire
    // later: no waiting out the clock needed.
    const settledBy = Date.now() + 10_000;
    while (timers.withDelay(1000).some((t) => t.state === 'pending')) {
      if (Date.now() > settledBy) throw new Error('a request deadline still pending 10 s after convergence');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const deadlines = timers.withDelay(1000);
    expect(deadlines.length).toBeGreaterThanOrEqual(7); // hello, 5 pulls, the read
    expect(deadlines.filter((t) => t.state === 'fired')).toEqual([]);
    expect(closes).toEqual([]);
    expect(tap.sockets).toHaveLength(1);
  });
});

describe('heartbeat', () => {
  it('a socket that stops delivering is found by the heartbeat (a pull after heartbeatMs quiet, unanswered): dropped (4000) and SYNCED again', async () => {
    await dm('hb1', 1);
    let deaf = false;
    let deafAt = 0;
    const tap = newTap((_frame, deliver) => {
      // The first socket goes deaf once synced: everything the server sends on it is lost.
      if (!deaf || tap.sockets.length > 1) deliver();
    });
    const c = client('hb1-me', { WebSocket: tapped(tap), requestTimeoutMs: TIMEOUT_MS, heartbeatMs: 300, backoff: { baseMs: 20, maxMs: 100 } });
    const closes: Array<number | undefined> = [];
    c.on('status', (e: StatusEvent) => {
      if (e.connection === 'offline') closes.push(e.closeCode);
    });
    await c.start();
    await until(c, synced, 'first sync');
    deaf = true;
    deafAt = performance.now();
    await until(c, () => closes.length > 0, 'the dead socket dropped');
    expect(closes[0]).toBe(REQUEST_TIMEOUT_CLOSE);
    // heartbeatMs + requestTimeoutMs, with room for a loaded machine.
    expect(performance.now() - deafAt).toBeLessThan(300 + TIMEOUT_MS + 3000);
    const pulls = tap.sent.filter((x) => x.frame.t === 'pull' && x.at > deafAt);
    expect(pulls.length).toBeGreaterThan(0);
    await h.post({ conv: 'hb1', seq: 2, sender: 'hb1-peer' });
    const s = await convergedTo(h, c, 'hb1-me');
    expect(unreadOf(s, 'hb1')).toBe(2);
  });

  it('a healthy quiet connection only pulls (empty pages) and stays open', async () => {
    await dm('hb2', 1);
    const tap = newTap();
    const c = client('hb2-me', { WebSocket: tapped(tap), requestTimeoutMs: TIMEOUT_MS, heartbeatMs: 200 });
    const closes: Array<number | undefined> = [];
    c.on('status', (e: StatusEvent) => {
      if (e.connection === 'offline') closes.push(e.closeCode);
    });
    await c.start();
    await until(c, synced, 'first sync');
    const since = tap.sent.length;
    await until(c, () => tap.sent.slice(since).filter((x) => x.frame.t === 'pull').length >= 2, 'two heartbeat pulls');
    expect(closes).toEqual([]);
    expect(tap.sockets).toHaveLength(1);
    await until(c, synced, 'SYNCED after the heartbeat pulls');
    expect(closes).toEqual([]);
  });
});
