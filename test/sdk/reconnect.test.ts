import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileCache } from '../../client-demo/sdk/src/file.js';
import { Backoff, type ClientOptions, MemoryCache, type RedpointClient, type ResetEvent, type StatusEvent } from '../../client-demo/sdk/src/index.js';
import { sdkSuite, startHarness } from './harness.js';
import { recordingTimers } from './recording-timers.js';
import { newTap, tapped } from './tap.js';
import { convergedTo, synced, unreadOf, until } from './wait.js';

const suite = sdkSuite();
const { h } = suite;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'redpoint-sdk-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A client that retries fast. */
function client(uid: string, extra: Partial<ClientOptions> = {}): RedpointClient {
  return suite.client(uid, { backoff: { baseMs: 20, maxMs: 100 }, ...extra });
}

async function dm(name: string, unread: number): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`], category: 'private' });
  for (let seq = 1; seq <= unread; seq++) await h.post({ conv: name, seq, sender: `${name}-peer` });
}

describe('backoff', () => {
  it('grows exponentially under a cap, with full jitter', () => {
    const top = new Backoff({ baseMs: 100, maxMs: 1000 }, () => 0.999);
    expect(Array.from({ length: 7 }, () => top.next())).toEqual([99, 199, 399, 799, 999, 999, 999]);
    top.reset();
    expect(top.next()).toBe(99);
    const draws = [0, 0.5, 0.25];
    const jitter = new Backoff({ baseMs: 100, maxMs: 1000 }, () => draws.shift() ?? 0);
    expect([jitter.next(), jitter.next(), jitter.next()]).toEqual([0, 100, 100]);
  });

  it('reconnects after a server stop with those delays, and starts over once synced', async () => {
    await dm('k1', 1);
    const timers = recordingTimers();
    const c = client('k1-me', { timers, random: () => 0.5, backoff: { baseMs: 62, maxMs: 500 } });
    await c.start();
    await until(c, synced, 'synced');
    const reconnectDelays = () => timers.delays.filter((ms) => ms !== 15_000);
    timers.delays.length = 0;
    await h.down();
    await until(c, () => reconnectDelays().length >= 5, 'five reconnect attempts', 5000);
    expect(c.state.stale).toBe(true);
    expect(unreadOf(c.state, 'k1')).toBe(1);
    await h.up();
    await convergedTo(h, c, 'k1-me');
    expect(reconnectDelays().slice(0, 5)).toEqual([31, 62, 124, 248, 250]);
    timers.delays.length = 0;
    await h.down();
    await until(c, () => reconnectDelays().length >= 1, 'a reconnect attempt');
    expect(reconnectDelays()[0]).toBe(31);
  });
});

describe('close codes', () => {
  it('4003 token_expired: fetches a new token and reconnects', async () => {
    await dm('k2', 1);
    let calls = 0;
    const c = client('k2-me', { token: () => h.token('k2-me', ++calls === 1 ? -10 : 3600) });
    const events: StatusEvent[] = [];
    c.on('status', (e) => events.push(e));
    await c.start();
    await convergedTo(h, c, 'k2-me');
    expect(calls).toBe(2);
    expect(events.some((e) => e.closeCode === 4003)).toBe(true);
  });

  it('4002 unauthorized: gives up at once (auth_failed), no retry', async () => {
    let calls = 0;
    const timers = recordingTimers();
    const c = client('k3-me', {
      timers,
      token: async () => {
        calls += 1;
        return 'not-a-jwt';
      },
    });
    await c.start();
    const closed = await until(c, (s) => s.connection === 'auth_failed', 'auth_failed');
    expect(closed.status).toBe('NO_DATA');
    expect(calls).toBe(1);
    expect(timers.delays.filter((ms) => ms !== 15_000)).toEqual([]);
  });
});

describe('restarts', () => {
  it('server stopped: counts stay (stale, not zero); reads made meanwhile reach it after the restart', async () => {
    await dm('k4', 3);
    await h.members('k4-other', { add: ['k4-me', 'k4-peer'], category: 'group' });
    await h.post({ conv: 'k4-other', seq: 1, sender: 'k4-peer' });
    const c = client('k4-me');
    await c.start();
    await convergedTo(h, c, 'k4-me');
    await h.down();
    const offline = await until(c, (s) => s.connection === 'offline', 'offline');
    expect(offline.stale).toBe(true);
    expect(offline.status).toBe('DIRTY');
    expect(offline.totals?.total).toBe(4);
    c.markRead('k4');
    expect(c.state.totals?.total).toBe(1);
    await h.up();
    await convergedTo(h, c, 'k4-me');
    expect((await h.unread('k4-me')).total).toBe(1);
  });

  it('a start that cannot connect shows the cached counts, marked stale, then syncs', async () => {
    await dm('k5', 2);
    const cache = new FileCache(join(dir, 'k5.json'));
    const first = client('k5-me', { cache });
    await first.start();
    await convergedTo(h, first, 'k5-me');
    await first.stop();
    await h.down();
    const second = client('k5-me', { cache });
    await second.start();
    expect(second.state.status).toBe('DIRTY');
    expect(second.state.stale).toBe(true);
    expect(second.state.totals?.total).toBe(2);
    expect(unreadOf(second.state, 'k5')).toBe(2);
    await until(second, (s) => s.connection === 'offline', 'the failed connect');
    expect(second.state.totals?.total).toBe(2);
    await h.up();
    await convergedTo(h, second, 'k5-me');
  });

  it('another epoch (the server lost its state) replaces everything with the new snapshot', async () => {
    await dm('k6', 2);
    const cache = new MemoryCache();
    const first = client('k6-me', { cache });
    await first.start();
    await convergedTo(h, first, 'k6-me');
    await first.stop();
    const fresh = await startHarness();
    try {
      await fresh.members('k6-new', { add: ['k6-me', 'k6-peer'], category: 'group' });
      await fresh.post({ conv: 'k6-new', seq: 1, sender: 'k6-peer' });
      const tap = newTap();
      const second = suite.client('k6-me', { url: fresh.wsUrl, token: () => fresh.token('k6-me'), WebSocket: tapped(tap), cache });
      const resets: ResetEvent[] = [];
      second.on('reset', (e) => resets.push(e));
      await second.start();
      expect(unreadOf(second.state, 'k6')).toBe(2);
      await convergedTo(fresh, second, 'k6-me');
      expect(second.state.conversations.map((v) => v.conv)).toEqual(['k6-new']);
      expect(tap.received.some((r) => r.frame.t === 'sync' && r.frame.snapshot !== undefined)).toBe(true);
      expect(second.state.cursor?.epoch).not.toBe(first.state.cursor?.epoch);
      // The cached cursor was of the old history: the page can say the counts were reloaded.
      expect(resets).toEqual([{ from: first.state.cursor, to: second.state.cursor }]);
    } finally {
      await fresh.close();
    }
  });

  it('a restart that lost the state emits one reset; a restart that kept it and a first history emit none', async () => {
    await dm('k7', 2);
    const c = client('k7-me');
    const resets: ResetEvent[] = [];
    c.on('reset', (e) => resets.push(e));
    await c.start();
    await convergedTo(h, c, 'k7-me');
    await h.down();
    await until(c, (s) => s.connection === 'offline', 'offline');
    await h.up();
    await convergedTo(h, c, 'k7-me');
    expect(resets).toEqual([]);

    // A memory engine restarting: the fresh server has never seen k7-me (epoch "0", nothing).
    const before = c.state.cursor;
    await h.down();
    await until(c, (s) => s.connection === 'offline', 'offline');
    await h.up({ freshEngine: true });
    await until(c, (s) => synced(s) && s.conversations.length === 0, "the fresh server's empty state");
    expect(resets).toEqual([{ from: before, to: { epoch: '0', version: 0 } }]);

    // The user's first history there starts under a new epoch: no reset, nothing was lost.
    await dm('k7', 1);
    await convergedTo(h, c, 'k7-me');
    expect(c.state.cursor?.epoch).not.toBe('0');
    expect(c.state.cursor?.epoch).not.toBe(before?.epoch);
    expect(resets).toHaveLength(1);
  });
});
