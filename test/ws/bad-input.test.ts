import { inspect } from 'node:util';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type AckFrame, CLOSE_CODES, type ErrorFrame } from '../../protocol/frames.js';
import type { Cursor } from '../../protocol/types.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import type { WsClient } from '../helpers/ws-client.js';
import { expectMatchesServer, isChange, isError } from '../helpers/ws-expect.js';

/**
 * Hostile and broken clients. Every case ends with an error frame or the documented close code,
 * leaves the user's state untouched (version unchanged), and a bystander on the same server keeps
 * being served.
 */
const OPTIONS = {
  helloTimeoutMs: 300,
  maxPayloadBytes: 4096,
  framesPerSecond: 50,
  framesBurst: 20,
  maxConnectionsPerUser: 2,
};

let server: TestServer;
let bystander: WsClient;
let bystanderSeq = 0;
const alice = 'alice';
const dm = 'dm-alice-bob';
let before: Cursor;

beforeAll(async () => {
  server = await startTestServer({ ws: OPTIONS });
  await server.members(dm, { add: [alice, 'bob'] });
  await server.post([
    { conv: dm, seq: 1, sender: 'bob' },
    { conv: dm, seq: 2, sender: 'bob' },
  ]);
  await server.members('dm-zed-yan', { add: ['zed', 'yan'] });
  await server.members('elsewhere', { add: ['yan', 'bob'] });
  bystander = await server.client('zed', { binary: true });
});

afterAll(async () => {
  await server?.close();
});

beforeEach(async () => {
  before = await server.position(alice);
});

/** Each case's sockets are closed after it, so alice's open connections never reach the per-user limit across cases. */
const opened: WsClient[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((c) => c.close()));
});

async function open(uid: string, options: Parameters<TestServer['client']>[1] = {}): Promise<WsClient> {
  const c = await server.client(uid, options);
  opened.push(c);
  return c;
}

/** Nothing the culprit sent changed alice's state, and the bystander still gets pushes and acks. */
async function unharmed(): Promise<void> {
  expect(await server.position(alice)).toEqual(before);
  expect((await server.unread(alice)).total).toBe(2);
  const m = bystander.mark();
  bystanderSeq++;
  await server.post({ conv: 'dm-zed-yan', seq: bystanderSeq, sender: 'yan' });
  await bystander.waitFrame(
    isChange('dm-zed-yan', (f) => f.state?.lastSeq === bystanderSeq),
    { since: m },
  );
  const ack = await bystander.read([['dm-zed-yan', bystanderSeq]]);
  expect(ack.t).toBe('ack');
  await bystander.waitFor(() => bystander.cursor?.version === (ack as AckFrame).version, 5000, 'bystander at its ack');
  await expectMatchesServer(bystander, server, 'bystander');
}

/** A socket of alice's that has not said hello. */
const raw = (binary = false): Promise<WsClient> => open(alice, { hello: false, binary });

describe('malformed frames: an error frame, the connection stays usable', () => {
  it('garbage MessagePack bytes, before and after hello', async () => {
    const c = await raw(true);
    c.sendRaw(new Uint8Array([0x81, 0xa1]), true);
    const err = await c.waitFrame(isError('bad_json'));
    expect(c.frames.at(-1)?.binary).toBe(true);
    expect(err.id).toBeUndefined();
    c.hello();
    await c.ready();
    c.sendRaw(new Uint8Array([0xff, 0x00, 0xc1, 0x81]), true);
    c.sendRaw(new Uint8Array([0x92]), true);
    await c.waitFor(() => c.framesOf('error').length === 3, 5000, 'three error frames');
    await c.sync();
    expect(c.isOpen).toBe(true);
    await expectMatchesServer(c, server, 'after garbage');
    await unharmed();
  });

  it('garbage text: not JSON, JSON that is not a frame', async () => {
    const c = await open(alice);
    for (const text of ['{"t":', 'hello', 'null', '[1,2,3]', '"pull"', '{"t":7}']) c.sendRaw(text, false);
    await c.waitFor(() => c.framesOf('error').length === 6, 5000, 'six error frames');
    expect(c.framesOf('error').map((e) => e.code)).toEqual([
      'bad_json',
      'bad_json',
      'invalid_request',
      'invalid_request',
      'invalid_request',
      'invalid_request',
    ]);
    expect(c.frames.every((r) => !r.binary)).toBe(true);
    await c.sync();
    await expectMatchesServer(c, server, 'after garbage text');
    await unharmed();
  });

  it('a text frame that is not UTF-8: uWS drops the connection', async () => {
    const c = await open(alice);
    c.sendRaw(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), false);
    const { code } = await c.waitClose();
    expect([1006, 1007]).toContain(code);
    await unharmed();
  });

  it('frames of the wrong shape name the offending field', async () => {
    const c = await open(alice, { binary: true });
    const wrong: object[] = [
      { t: 'read', id: 1, reads: 'all of them' },
      { t: 'read', id: 2, reads: [[dm, -1]] },
      { t: 'read', id: 3, reads: [['bad id with spaces', 1]] },
      { t: 'pull', id: -1 },
      { t: 'pull', id: 4, since: { epoch: 5, version: 'x' } },
      { t: 'settings', id: 5, conv: dm },
      { t: 'read', id: 6, reads: [[dm, 1]], extra: true },
    ];
    for (const frame of wrong) c.send(frame);
    await c.waitFor(() => c.framesOf('error').length === wrong.length, 5000, 'an error per frame');
    const errors = c.framesOf('error');
    expect(errors.every((e) => e.code === 'invalid_request')).toBe(true);
    expect(errors[0]?.message).toMatch(/\/reads/);
    expect(errors[1]?.message).toMatch(/\/reads\/0\/1/);
    expect(errors[4]?.message).toMatch(/\/since/);
    await c.sync();
    await expectMatchesServer(c, server, 'after wrong shapes');
    await unharmed();
  });

  it('user-settings frames with no field, wrong types or extra fields: an error each, the settings unchanged', async () => {
    const settingsBefore = (await server.api('GET', `/v1/users/${alice}/settings`)).body;
    expect(settingsBefore).toEqual({ uid: alice, shareReads: true, mutedMentions: false });
    // Binary: MessagePack can carry `undefined` (msgpackr's encoding of a JS field left undefined),
    // a key with no value, as empty as a frame with no field.
    const c = await open(alice, { binary: true });
    const wrong: Array<[Record<string, unknown>, RegExp]> = [
      [{ t: 'user-settings' }, /nothing to change/],
      [{ t: 'user-settings', mutedMentions: undefined }, /nothing to change/],
      [{ t: 'user-settings', mutedMentions: 'yes' }, /\/mutedMentions/],
      [{ t: 'user-settings', mutedMentions: null }, /\/mutedMentions/],
      [{ t: 'user-settings', shareReads: 0 }, /\/shareReads/],
      [{ t: 'user-settings', shareReads: [false] }, /\/shareReads/],
      // A valid field beside an unknown one is not applied either.
      [{ t: 'user-settings', mutedMentions: true, extra: true }, /\/extra/],
      [{ t: 'user-settings', mutedMentions: true, uid: 'bob' }, /\/uid/],
      [{ t: 'user-settings', muted: true }, /\/muted/],
    ];
    for (const [frame, message] of wrong) {
      const reply = await c.request(frame);
      expect(reply, inspect(frame)).toMatchObject({ t: 'error', code: 'invalid_request' });
      expect((reply as ErrorFrame).message, inspect(frame)).toMatch(message);
    }
    expect(c.isOpen).toBe(true);
    expect((await server.api('GET', `/v1/users/${alice}/settings`)).body).toEqual(settingsBefore);
    // The socket still serves the frame: a well-formed one (the value alice has) is acked, at her position.
    expect(await c.request({ t: 'user-settings', shareReads: true })).toMatchObject({ t: 'ack', ...before });
    await c.sync();
    await expectMatchesServer(c, server, 'after bad user-settings frames');
    await unharmed();
  });

  it('an unknown frame type', async () => {
    const c = await open(alice);
    c.send({ t: 'subscribe', id: 1, conv: dm });
    const err = await c.waitFrame(isError('invalid_request'));
    expect(err.message).toMatch(/unknown frame type "subscribe"/);
    await c.sync();
    await unharmed();
  });

  it('repeated malformed frames: close 4004', async () => {
    const c = await open(alice);
    for (let i = 0; i < 12; i++) c.sendRaw('not json', false);
    expect(await c.waitClose()).toEqual({ code: CLOSE_CODES.protocol_error.code, reason: 'protocol_error' });
    expect(c.framesOf('error').length).toBe(9);
    await unharmed();
  });

  it('a frame larger than maxPayloadBytes: uWS closes the socket', async () => {
    const c = await open(alice, { binary: true });
    c.send({ t: 'read', id: 1, reads: [[dm, 2]], pad: 'x'.repeat(OPTIONS.maxPayloadBytes) });
    const { code } = await c.waitClose();
    // uWS drops the TCP connection without a close frame.
    expect([1006, 1009]).toContain(code);
    expect(c.framesOf('ack')).toEqual([]);
    await unharmed();
  });
});

describe('hello', () => {
  it('a frame before hello: close 4004, and a read before hello is not applied', async () => {
    const c = await raw();
    c.send({ t: 'read', id: 1, reads: [[dm, 2]] });
    expect(await c.waitClose()).toEqual({ code: 4004, reason: 'protocol_error' });
    const d = await raw(true);
    d.send({ t: 'pull', id: 1 });
    expect((await d.waitClose()).code).toBe(4004);
    await unharmed();
  });

  it('a second hello: close 4004 (also when sent back to back)', async () => {
    const c = await open(alice);
    c.hello();
    expect((await c.waitClose()).code).toBe(4004);
    expect(c.framesOf('welcome').length).toBe(1);

    const d = await raw();
    d.hello();
    d.hello();
    expect((await d.waitClose()).code).toBe(4004);
    expect(d.framesOf('welcome').length).toBeLessThanOrEqual(1);
    await unharmed();
  });

  it('frames pipelined right after hello are served (not "before hello")', async () => {
    const c = await raw(true);
    c.hello();
    const reply = await c.read([[dm, 0]]);
    expect(reply).toMatchObject({ t: 'ack', version: before.version });
    await c.ready();
    expect(c.isOpen).toBe(true);
    await expectMatchesServer(c, server, 'pipelined');
    await unharmed();
  });

  it('a malformed frame right after hello is answered after the welcome, not before it', async () => {
    const c = await raw();
    c.hello();
    c.sendRaw('{not json', false);
    await c.waitFrame(isError('bad_json'));
    const kinds = c.frames.map((r) => r.frame.t);
    expect(kinds[0]).toBe('welcome');
    expect(kinds.indexOf('error')).toBeGreaterThan(0);
    await c.ready();
    expect(c.isOpen).toBe(true);
    await unharmed();
  });

  it('forged, garbage, expired, missing or empty tokens: 4002 / 4003', async () => {
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(alice)
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode('another-secret-0123456789abcdef-0123456789'));
    const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(`{"sub":"${alice}","exp":9999999999}`).toString('base64url')}.`;
    const expired = await server.auth.mintUserToken(alice, -60);
    const badSubject = await server.auth.mintUserToken('not a valid id!');
    const cases: Array<[string, object, number]> = [
      ['forged', { t: 'hello', token: forged }, 4002],
      ['alg none', { t: 'hello', token: unsigned }, 4002],
      ['garbage', { t: 'hello', token: 'garbage' }, 4002],
      ['invalid subject', { t: 'hello', token: badSubject }, 4002],
      ['expired', { t: 'hello', token: expired }, 4003],
      ['missing', { t: 'hello' }, 4002],
      ['empty', { t: 'hello', token: '' }, 4002],
      ['not a string', { t: 'hello', token: 42 }, 4002],
    ];
    const clients = await Promise.all(cases.map((_, i) => raw(i % 2 === 0)));
    for (const [i, [, frame]] of cases.entries()) clients[i]?.send(frame);
    for (const [i, [name, , code]] of cases.entries()) {
      const c = clients[i] as WsClient;
      expect({ name, code: (await c.waitClose()).code }).toEqual({ name, code });
      expect(c.framesOf('welcome')).toEqual([]);
      expect(c.framesOf('sync')).toEqual([]);
    }
    expect(CLOSE_CODES.token_expired.reconnect).toBe(true);
    expect(CLOSE_CODES.unauthorized.reconnect).toBe(false);
    await unharmed();
  });

  it('a malformed hello (a bad cursor) gets an error frame; a correct one may follow', async () => {
    const c = await raw();
    c.send({ t: 'hello', token: await server.token(alice), cursor: { epoch: 7 } });
    const err = await c.waitFrame(isError('invalid_request'));
    expect(err.message).toMatch(/\/cursor/);
    c.hello();
    await c.ready();
    await expectMatchesServer(c, server, 'after a second try');
    await unharmed();
  });

  it('no hello within helloTimeoutMs: close 4001 (garbage does not count as hello)', async () => {
    const silent = await raw();
    const noisy = await raw(true);
    noisy.sendRaw(new Uint8Array([0x81, 0xa1]), true);
    const started = Date.now();
    expect((await silent.waitClose(3000)).code).toBe(4001);
    expect((await noisy.waitClose(3000)).code).toBe(4001);
    expect(Date.now() - started).toBeGreaterThanOrEqual(OPTIONS.helloTimeoutMs - 50);
    await unharmed();
  });
});

describe('requests the server refuses', () => {
  it('a read of a conversation the user is not in: ack with `rejected` (not_a_member, or unknown_conversation), version unchanged', async () => {
    const c = await open(alice);
    const ack = (await c.read([['elsewhere', 5]])) as AckFrame;
    expect(ack).toEqual({
      t: 'ack',
      id: ack.id,
      epoch: before.epoch,
      version: before.version,
      rejected: [{ conv: 'elsewhere', code: 'not_a_member' }],
    });
    const unknown = (await c.read([['no-such-conv', 1]])) as AckFrame;
    expect(unknown.rejected).toEqual([{ conv: 'no-such-conv', code: 'unknown_conversation' }]);
    const both = (await c.read([
      ['no-such-conv', 1],
      ['elsewhere', 2],
    ])) as AckFrame;
    expect(both.rejected).toEqual([
      { conv: 'no-such-conv', code: 'unknown_conversation' },
      { conv: 'elsewhere', code: 'not_a_member' },
    ]);
    const settings = (await c.settings('elsewhere', { muted: true })) as ErrorFrame;
    expect(settings).toMatchObject({ t: 'error', code: 'not_a_member' });
    expect(settings.message).toContain('PUT /v1/conversations/elsewhere/members');
    const deleted = (await c.settings('elsewhere', { deleted: true })) as ErrorFrame;
    expect(deleted).toMatchObject({ t: 'error', code: 'not_a_member' });
    const missing = (await c.settings('no-such-conv', { muted: true })) as ErrorFrame;
    expect(missing).toMatchObject({ t: 'error', code: 'unknown_conversation' });
    expect(missing.message).toContain('PUT /v1/conversations/no-such-conv/members');
    await c.sync();
    expect(c.framesOf('change')).toEqual([]);
    await unharmed();
  });

  it('a flood beyond the rate limit: rate_limited error frames, then close 4008', async () => {
    // Its own server with a slow refill (1 frame/s): on a busy machine a flood spread over a few
    // refills would reset the "refused in a row" count and blur what this case checks.
    const limits = { framesPerSecond: 1, framesBurst: 5 };
    const slow = await startTestServer({ ws: { ...OPTIONS, ...limits } });
    try {
      await slow.members(dm, { add: [alice, 'bob'] });
      await slow.members('z', { add: ['zed', 'yan'] });
      await slow.post({ conv: dm, seq: 1, sender: 'bob' });
      const other = await slow.client('zed');
      const start = await slow.position(alice);
      const c = await slow.client(alice, { binary: true });
      const m = c.mark();
      for (let i = 0; i < 100; i++) c.send({ t: 'read', id: 1000 + i, reads: [[dm, 1]] });
      expect(await c.waitClose()).toEqual({ code: CLOSE_CODES.rate_limited.code, reason: 'rate_limited' });
      const limited = c.framesSince(m).filter((f) => f.t === 'error' && f.code === 'rate_limited');
      // The burst is served, then refusals (answered) until `framesBurst` in a row close the socket.
      expect(limited.length).toBeGreaterThan(0);
      expect(limited.length).toBeLessThan(limits.framesBurst);
      expect(c.framesOf('ack', m).length).toBeLessThanOrEqual(limits.framesBurst);
      // The reads that were served did change state once (one version); the refused ones nothing.
      const after = await slow.position(alice);
      expect(after.version).toBe(start.version + 1);
      const mo = other.mark();
      await slow.post({ conv: 'z', seq: 1, sender: 'yan' });
      await other.waitFrame(isChange('z'), { since: mo });
      expect((await other.read([['z', 1]])).t).toBe('ack');
      await expectMatchesServer(other, slow, 'bystander of the flooded server');
    } finally {
      await slow.close();
    }
    await unharmed();
  });

  it('more connections than maxConnectionsPerUser: the oldest is closed 4009', async () => {
    const first = await open(alice);
    const second = await open(alice, { binary: true });
    const third = await open(alice);
    expect(await first.waitClose()).toEqual({ code: CLOSE_CODES.too_many_connections.code, reason: 'too_many_connections' });
    for (const c of [second, third]) {
      expect(c.isOpen).toBe(true);
      await c.sync();
      await expectMatchesServer(c, server, 'a newer connection');
    }
    await second.close();
    await third.close();
    await unharmed();
  });
});

describe('graceful shutdown', () => {
  it('server.close() closes every socket with 1001 and refuses new ones', async () => {
    const other = await startTestServer({ ws: OPTIONS });
    await other.members('g', { add: ['u1', 'u2'] });
    const clients = [await other.client('u1'), await other.client('u2', { binary: true }), await other.client('u1', { hello: false })];
    // The server itself (the fixture's close would close the clients first).
    await other.server.close();
    for (const c of clients) expect(await c.waitClose()).toEqual({ code: CLOSE_CODES.going_away.code, reason: 'going_away' });
    await expect(
      new Promise((resolve, reject) => {
        const ws = new WebSocket(other.wsUrl);
        ws.once('open', () => resolve('open'));
        ws.once('error', reject);
      }),
    ).rejects.toThrow();
    await other.close();
    // The other server is unaffected.
    await unharmed();
  });
});
