import { describe, expect, it } from 'vitest';
import { AuthError, ClosedError, type RedpointClient, type Timers } from '../../client-demo/sdk/src/index.js';
import { sdkSuite } from './harness.js';
import { recordingTimers } from './recording-timers.js';
import { newTap, tapped } from './tap.js';
import { convergedTo, until } from './wait.js';

/**
 * A client whose token source keeps handing out tokens the server refuses stops after
 * `maxAuthFailures` (3) refused hellos in a row, says why (an `error` event and `ready()` rejected
 * with the server's code and check) and stays `auth_failed` until told to `reconnect()`. Trouble
 * that says nothing about the token (a server down, a token endpoint that throws) never counts.
 */

// No clock tolerance: a socket whose 2 s token was not refreshed is closed 4003 when it runs out.
const suite = sdkSuite({ config: { jwtClockToleranceSeconds: 0 } });
const { h } = suite;

/** The request timeouts the client arms per hello; anything else pending is a retry. */
const REQUEST_TIMEOUT_MS = 15_000;

async function dm(name: string): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`], category: 'private' });
  await h.post({ conv: name, seq: 1, sender: `${name}-peer` });
}

/** Events and token calls of a client, and whether its token source hands out good tokens. */
function watched(uid: string, timers = recordingTimers()) {
  const seen = { calls: 0, good: false, errors: [] as Error[] };
  const c: RedpointClient = suite.client(uid, {
    timers,
    backoff: { baseMs: 20, maxMs: 100 },
    token: () => {
      seen.calls += 1;
      return h.token(uid, seen.good ? 3600 : -60);
    },
  });
  c.on('error', (err) => seen.errors.push(err));
  return { c, seen, timers };
}

describe('repeated authentication failures', () => {
  it('expired tokens: stops after 3 refused hellos, emits the cause, rejects ready(), state auth_failed; reconnect() with a good token resumes', async () => {
    await dm('af1');
    const { c, seen, timers } = watched('af1-me');
    const ready = c.ready();
    await c.start();
    const err = await ready.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthError);
    expect(err).toBeInstanceOf(ClosedError);
    expect(err).toMatchObject({ code: 'token_expired', check: 'expired', closeCode: 4003, attempts: 3 });
    expect((err as AuthError).message).toContain('fetch a new token');
    expect(c.state.connection).toBe('auth_failed');
    expect(seen.calls).toBe(3);
    expect(seen.errors.filter((e) => e instanceof AuthError)).toEqual([err]);
    // Given up for good: no retry armed, and none comes.
    expect(timers.timers.filter((t) => t.state === 'pending' && t.ms !== REQUEST_TIMEOUT_MS)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(seen.calls).toBe(3);
    await expect(c.ready()).rejects.toBe(err);

    seen.good = true;
    c.reconnect();
    await c.ready();
    await convergedTo(h, c, 'af1-me');
    expect(c.state.connection).toBe('open');
    expect(seen.calls).toBe(4);
  });

  it('a refused token that is not expired (4002) stops at once, with the check that failed', async () => {
    const c = suite.client('af2-me', { backoff: { baseMs: 20, maxMs: 100 }, token: async () => 'abc.def.ghi' });
    const errors: Error[] = [];
    c.on('error', (e) => errors.push(e));
    const ready = c.ready();
    await c.start();
    const err = await ready.catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'AuthError', code: 'unauthorized', check: 'malformed', closeCode: 4002, attempts: 1 });
    expect(c.state.connection).toBe('auth_failed');
    expect(errors).toContain(err);
  });

  it('two refusals, a welcome, two more: the count starts over at the welcome', async () => {
    await dm('af3');
    const tap = newTap();
    const hellos = (): number => tap.sent.filter((s) => s.frame.t === 'hello').length;
    // What token() hands out, by the hellos sent before it is called: two refused, a short one
    // welcomed (its refresh is refused, so the server closes it 4003 when it runs out), two
    // refused again, then good ones. Without the reset the fourth refusal would be the third in a row.
    const ttlByHello = [-60, -60, 2, -60, -60];
    const c = suite.client('af3-me', {
      WebSocket: tapped(tap),
      backoff: { baseMs: 20, maxMs: 100 },
      token: () => h.token('af3-me', ttlByHello[hellos()] ?? 3600),
    });
    const states: string[] = [];
    c.on('status', (e) => states.push(e.connection));
    await c.start();
    await until(c, () => hellos() >= 6 && c.state.connection === 'open', 'open on the sixth hello', 15_000);
    expect(states).not.toContain('auth_failed');
    expect(tap.received.filter((r) => r.frame.t === 'welcome')).toHaveLength(2);
    await convergedTo(h, c, 'af3-me');
  });

  it("reconnect() while waiting to retry starts the count over, as after giving up: the app's new token gets its own tries", async () => {
    await dm('af6');
    let calls = 0;
    // Retries wait for reconnect(): the backoff's timers (all under 10 s) are held, never fired.
    const timers: Timers = {
      setTimeout: (fn, ms) => (ms < 10_000 ? { held: fn } : setTimeout(fn, ms)),
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
    };
    const c = suite.client('af6-me', {
      timers,
      backoff: { baseMs: 9_000, maxMs: 9_000 },
      token: () => {
        calls += 1;
        return h.token('af6-me', -60);
      },
    });
    const offline = async (n: number) => until(c, (s) => calls === n && s.connection === 'offline', `offline after refused hello ${n}`);
    await c.start();
    await offline(1);
    // Two more refusals, each after a reconnect(): without the restart of the count the third
    // would be the third in a row and give up.
    c.reconnect();
    await offline(2);
    c.reconnect();
    await offline(3);
    expect(c.state.connection).toBe('offline');
  });

  it('a server that is down is not an authentication failure: no giving up, however many attempts', async () => {
    await dm('af4');
    const { c, seen, timers } = watched('af4-me');
    seen.good = true;
    await h.down();
    await c.start();
    await until(c, () => timers.delays.filter((ms) => ms !== REQUEST_TIMEOUT_MS).length >= 6, 'six reconnect attempts', 10_000);
    expect(c.state.connection).not.toBe('auth_failed');
    await h.up();
    await convergedTo(h, c, 'af4-me');
    expect(seen.errors.filter((e) => e instanceof AuthError)).toEqual([]);
  });

  it('a token endpoint that throws is not an authentication failure either', async () => {
    await dm('af5');
    let calls = 0;
    const timers = recordingTimers();
    const c = suite.client('af5-me', {
      timers,
      backoff: { baseMs: 20, maxMs: 100 },
      token: () => {
        calls += 1;
        if (calls <= 5) return Promise.reject(new Error('token endpoint unreachable'));
        return h.token('af5-me');
      },
    });
    await c.start();
    await convergedTo(h, c, 'af5-me');
    expect(calls).toBe(6);
  });
});
