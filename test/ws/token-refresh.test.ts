import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ServerFrame } from '../../protocol/frames.js';
import { jwksOf, makeKey, startJwksServer, type TestKey } from '../auth/keys.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import type { WsClient } from '../helpers/ws-client.js';

/**
 * A socket is served only while its token is valid: `exp` is checked for the socket's whole life,
 * not at hello only. The client sends `refresh` with a new token of the same user before expiry;
 * a socket whose token expired is closed 4003 (PROTOCOL.md "Token lifetime on a live socket").
 * The server runs with no clock tolerance, so expiry is exactly `exp`.
 */
let server: TestServer;
const alice = 'alice';
const dm = 'dm-alice-bob';

beforeAll(async () => {
  server = await startTestServer({ config: { jwtClockToleranceSeconds: 0 } });
  await server.members(dm, { add: [alice, 'bob'] });
  await server.post({ conv: dm, seq: 1, sender: 'bob' });
});
afterAll(async () => {
  await server?.close();
});
const opened: WsClient[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

type Refreshed = Extract<ServerFrame, { t: 'refreshed' }>;

/** Resolves once the wall clock reaches `at` (ms): the event waited for is a token's expiry. */
const clockAt = (at: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));

async function short(uid = alice, ttl = 2): Promise<{ c: WsClient; exp: number }> {
  const token = await server.token(uid, ttl);
  const exp = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()).exp as number;
  const c = await server.client(uid, { token });
  opened.push(c);
  return { c, exp };
}

describe('token lifetime on a live socket', () => {
  it('welcome says how long the token has left', async () => {
    const { c, exp } = await short(alice, 60);
    const left = exp * 1000 - Date.now();
    expect(c.welcome?.expiresInMs).toBeGreaterThan(left - 5000);
    expect(c.welcome?.expiresInMs).toBeLessThanOrEqual(left + 1000);
  });

  it('served before exp; closed 4003 after exp without a refresh', async () => {
    const { c, exp } = await short();
    expect((await c.request({ t: 'pull' })).t).toBe('sync');
    const { code } = await c.waitClose(10_000);
    expect(code).toBe(4003);
    // Not before the token's exp (exp is in whole seconds).
    expect(Date.now()).toBeGreaterThanOrEqual(exp * 1000 - 50);
  });

  it('a refresh frame with a new token keeps the socket served past the first exp, across several lifetimes', async () => {
    const { c, exp } = await short();
    let until = exp;
    for (let round = 0; round < 3; round++) {
      const fresh = await server.token(alice, 4);
      const reply = await c.request({ t: 'refresh', token: fresh });
      expect(reply.t).toBe('refreshed');
      expect((reply as unknown as Refreshed).expiresInMs).toBeGreaterThan(1000);
      // Until the previous token has expired: the socket must be served on the new one.
      const previous = until;
      until = JSON.parse(Buffer.from(fresh.split('.')[1] ?? '', 'base64url').toString()).exp as number;
      await clockAt(previous * 1000 + 200);
      expect(c.closeInfo).toBeNull();
      const pulled = await c.request({ t: 'pull' });
      expect(pulled.t).toBe('sync');
      const ack = await c.read([[dm, 1]]);
      expect(ack.t).toBe('ack');
    }
    expect(c.isOpen).toBe(true);
    expect((await c.waitClose(10_000)).code).toBe(4003);
    expect(Date.now()).toBeGreaterThanOrEqual(until * 1000 - 50);
  });

  it('a refresh that does not verify, or is for another user, gets an error with its id and leaves the socket on its token', async () => {
    const { c } = await short(alice, 30);
    const forged = `${(await server.token(alice, 30)).slice(0, -4)}AAAA`;
    const bad = await c.request({ t: 'refresh', token: forged });
    expect(bad).toMatchObject({ t: 'error', code: 'unauthorized' });
    const other = await c.request({ t: 'refresh', token: await server.token('bob', 30) });
    expect(other).toMatchObject({ t: 'error', code: 'forbidden' });
    const expired = await c.request({ t: 'refresh', token: await server.token(alice, -60) });
    expect(expired).toMatchObject({ t: 'error', code: 'token_expired' });
    const empty = await c.request({ t: 'refresh', token: '' });
    expect(empty).toMatchObject({ t: 'error', code: 'invalid_request' });
    expect(c.isOpen).toBe(true);
    expect((await c.request({ t: 'pull' })).t).toBe('sync');
  });

  it('a refresh to a token expiring sooner moves the close earlier (the socket follows its newest token)', async () => {
    const { c } = await short(alice, 60);
    const reply = (await c.request({ t: 'refresh', token: await server.token(alice, 2) })) as unknown as Refreshed;
    expect(reply.t).toBe('refreshed');
    expect(reply.expiresInMs).toBeLessThanOrEqual(2000);
    expect((await c.waitClose(10_000)).code).toBe(4003);
  });
});

describe('a key removed from the JWK Set', () => {
  let es: TestKey;
  let rs: TestKey;
  beforeAll(async () => {
    [es, rs] = await Promise.all([makeKey('ES256', 'es-old'), makeKey('RS256', 'rs-kept')]);
  });

  it('closes the sockets its tokens opened with 4003 once a reload drops it; others stay', async () => {
    const keys = await startJwksServer(jwksOf(es, rs));
    const s = await startTestServer({ config: { jwtSecret: undefined, jwks: { url: keys.url, timing: { cooldownMs: 0, retryMs: 0 } } } });
    try {
      const old = await s.client(alice, { token: await es.sign(alice) });
      const kept = await s.client('bob', { token: await rs.sign('bob') });
      keys.serve(jwksOf(rs));
      // A token naming a kid the server lacks makes it reload the set.
      const other = await makeKey('ES256', 'es-unknown');
      await s.request('GET', '/v1/users/alice/unread', { auth: { bearer: await other.sign(alice) } });
      expect((await old.waitClose(10_000)).code).toBe(4003);
      expect(kept.isOpen).toBe(true);
      expect((await kept.request({ t: 'pull' })).t).toBe('sync');
    } finally {
      await s.close();
      await keys.stop();
    }
  });
});
