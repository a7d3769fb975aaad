import { describe, expect, it } from 'vitest';
import type { ServerFrame } from '../../protocol/frames.js';
import { sdkSuite } from './harness.js';
import { newTap } from './tap.js';
import { convergedTo, unreadOf, until } from './wait.js';

/**
 * The SDK keeps one socket alive across several token lifetimes: `token()` is called ahead of
 * each expiry and the new token goes to the server in a `refresh` frame, so the server never
 * closes the socket 4003 and the client never reconnects. No clock tolerance on the server, so
 * a token is refused at its `exp` exactly.
 */
const suite = sdkSuite({ config: { jwtClockToleranceSeconds: 0 } });
const { h } = suite;

describe('token refresh', () => {
  it('one socket across four 2-second tokens, no reconnect, still synced and served', async () => {
    const dm = 'dm-refresh';
    await h.members(dm, { add: ['rita', 'sam'] });
    let calls = 0;
    let refreshed = 0;
    let enough: () => void = () => undefined;
    const fourth = new Promise<void>((resolve) => (enough = resolve));
    const tap = newTap((frame: ServerFrame, deliver) => {
      if (frame.t === 'refreshed' && ++refreshed >= 4) enough();
      deliver();
    });
    const client = await suite.started('rita', tap, {
      token: () => {
        calls++;
        return h.token('rita', 2);
      },
    });
    const closes: number[] = [];
    client.on('status', (s) => {
      if (s.closeCode !== undefined) closes.push(s.closeCode);
    });
    // Four refreshes of 2-second tokens: well past the first token's life (bounded generously).
    await Promise.race([fourth, new Promise((_, reject) => setTimeout(() => reject(new Error(`only ${refreshed} refreshes`)), 20_000))]);
    expect(tap.sockets.length).toBe(1);
    expect(closes).toEqual([]);
    expect(calls).toBeGreaterThanOrEqual(5);
    expect(tap.sent.filter((s) => s.frame.t === 'refresh').length).toBeGreaterThanOrEqual(4);
    // Still served on the same socket: a push arrives, a read is acknowledged.
    await h.post({ conv: dm, seq: 1, sender: 'sam' });
    await until(client, (s) => unreadOf(s, dm) === 1, 'the push');
    client.markRead(dm);
    client.flushReads();
    await convergedTo(h, client, 'rita');
    expect(unreadOf(client.state, dm)).toBe(0);
    expect(tap.sockets.length).toBe(1);
  }, 40_000);

  it('a token() that keeps returning the expiring token: the socket closes 4003 and the client reconnects with a new one', async () => {
    let stale: string | undefined;
    let calls = 0;
    let closed4003 = false;
    const tap = newTap();
    const client = await suite.started('tess', tap, {
      token: async () => {
        calls++;
        // The first token, returned again for every refresh; the reconnect after 4003 gets a fresh one.
        if (!closed4003) {
          stale ??= await h.token('tess', 2);
          return stale;
        }
        return h.token('tess', 60);
      },
      backoff: { baseMs: 20, maxMs: 100 },
    });
    const codes: number[] = [];
    const reopened = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no reconnect after 4003; closes seen: ${JSON.stringify(codes)}`)), 15_000);
      client.on('status', (s) => {
        if (s.closeCode !== undefined) codes.push(s.closeCode);
        if (s.closeCode === 4003) closed4003 = true;
        if (codes.includes(4003) && s.connection === 'open') {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    await reopened;
    await until(client, (s) => s.status === 'SYNCED', 'synced again', 15_000);
    expect(codes[0]).toBe(4003);
    expect(tap.sockets.length).toBe(2);
    expect(calls).toBeGreaterThanOrEqual(3);
  }, 40_000);
});
