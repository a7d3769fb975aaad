import { request as httpRequest } from 'node:http';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import { ERROR_CODES, type ErrorCode } from '../../protocol/errors.js';
import { LIMITS } from '../../protocol/limits.js';
import type { UnreadSummary } from '../../protocol/types.js';
import type { EngineKind } from '../../server/engine/engine.js';
import { type ApiResponse, startTestServer, TEST_API_KEY, TEST_JWT_SECRET, type TestServer } from '../helpers/test-server.js';

/**
 * Every kind of bad request gets its documented 4xx and error code, changes nothing (the users'
 * versions and summaries stay put), and the server keeps answering afterwards.
 */
const ENGINES: EngineKind[] = ['memory', 'redis'];

const ALICE = 'alice';
const BOB = 'bob';
const CONV = 'room-1';

interface Case {
  name: string;
  send(s: TestServer): Promise<ApiResponse>;
  status: number;
  code: ErrorCode;
  /** Text the error message must start with (what a person reads first). */
  message?: string;
  /** Text the error message must contain: the fix it names. */
  names?: string;
}

const json = (s: TestServer, method: string, path: string, raw: string | Uint8Array, contentType = 'application/json') =>
  s.request(method, path, { raw, contentType });

async function signToken(secret: string, claims: { sub?: string; exp?: number; iat?: number }, alg = 'HS256'): Promise<string> {
  let jwt = new SignJWT({}).setProtectedHeader({ alg });
  if (claims.sub !== undefined) jwt = jwt.setSubject(claims.sub);
  if (claims.iat !== undefined) jwt = jwt.setIssuedAt(claims.iat);
  if (claims.exp !== undefined) jwt = jwt.setExpirationTime(claims.exp);
  return jwt.sign(new TextEncoder().encode(secret));
}

const now = (): number => Math.floor(Date.now() / 1000);
const unsignedToken = (sub: string): string =>
  `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify({ sub, exp: now() + 3600 })).toString('base64url')}.`;

const msg = (extra: Record<string, unknown> = {}) => ({ conv: CONV, seq: 100, sender: BOB, mentions: [ALICE], ...extra });
const post = (s: TestServer, body: unknown) => s.api('POST', '/v1/messages', body);

const CASES: Case[] = [
  // Bodies that do not parse.
  { name: 'malformed JSON', send: (s) => json(s, 'POST', '/v1/messages', '{"conv": "room-1", "seq": 1,'), status: 400, code: 'bad_json' },
  { name: 'empty body', send: (s) => json(s, 'POST', '/v1/messages', ''), status: 400, code: 'bad_json', names: 'takes a JSON' },
  { name: 'JSON that is not an object', send: (s) => json(s, 'POST', '/v1/messages', '[1,2,3]'), status: 400, code: 'invalid_request' },
  { name: 'JSON null', send: (s) => json(s, 'POST', '/v1/messages', 'null'), status: 400, code: 'invalid_request' },
  {
    name: 'msgpack body that is not msgpack',
    send: (s) => json(s, 'POST', '/v1/messages', new Uint8Array([0xc1, 0xff, 0x00]), 'application/msgpack'),
    status: 400,
    code: 'bad_json',
  },
  {
    name: 'truncated msgpack',
    send: (s) => json(s, 'POST', '/v1/messages', encodeMsgpack(msg()).slice(0, 10), 'application/msgpack'),
    status: 400,
    code: 'bad_json',
  },
  {
    name: 'msgpack of the wrong shape',
    send: (s) => json(s, 'POST', '/v1/messages', encodeMsgpack({ conv: CONV, seq: 'x', sender: BOB }), 'application/msgpack'),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'msgpack of a string',
    send: (s) => json(s, 'POST', '/v1/messages', encodeMsgpack('hello'), 'application/msgpack'),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'msgpack with a uint64 seq above 2^48',
    send: (s) => json(s, 'POST', '/v1/messages', msgpackWithUint64Seq(2n ** 50n), 'application/msgpack'),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'msgpack with a uint64 seq above 2^53',
    send: (s) => json(s, 'POST', '/v1/messages', msgpackWithUint64Seq(2n ** 63n + 7n), 'application/msgpack'),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'unsupported content type',
    send: (s) => json(s, 'POST', '/v1/messages', JSON.stringify(msg()), 'text/plain'),
    status: 415,
    code: 'unsupported_media_type',
    names: 'send application/json',
  },

  // Wrong types, missing and extra fields.
  { name: 'seq as a string', send: (s) => post(s, msg({ seq: '100' })), status: 400, code: 'invalid_request' },
  { name: 'conv as a number', send: (s) => post(s, msg({ conv: 1 })), status: 400, code: 'invalid_request' },
  { name: 'mentions not an array', send: (s) => post(s, msg({ mentions: ALICE })), status: 400, code: 'invalid_request' },
  { name: 'missing sender', send: (s) => post(s, { conv: CONV, seq: 100 }), status: 400, code: 'invalid_request' },
  { name: 'missing seq', send: (s) => post(s, { conv: CONV, sender: BOB }), status: 400, code: 'invalid_request' },
  { name: 'extra field', send: (s) => post(s, msg({ text: 'hi' })), status: 400, code: 'invalid_request' },
  { name: 'batch: empty', send: (s) => post(s, { messages: [] }), status: 400, code: 'invalid_request' },
  { name: 'batch: one bad message among good ones', send: (s) => post(s, { messages: [msg(), msg({ seq: -1 })] }), status: 400, code: 'invalid_request' },
  {
    name: 'batch: too many messages',
    send: (s) => post(s, { messages: Array.from({ length: LIMITS.messagesPerBatch + 1 }, (_, i) => msg({ seq: 100 + i })) }),
    status: 400,
    code: 'invalid_request',
  },
  { name: 'batch: extra top-level field', send: (s) => post(s, { messages: [msg()], more: true }), status: 400, code: 'invalid_request' },

  // Seqs out of range.
  { name: 'negative seq', send: (s) => post(s, msg({ seq: -5 })), status: 400, code: 'invalid_request' },
  { name: 'seq 0', send: (s) => post(s, msg({ seq: 0 })), status: 400, code: 'invalid_request' },
  // Issue 43: `at` is ms since the Unix epoch, from 2001-09-09 (seconds are refused), at most 24 h ahead.
  { name: 'at in seconds', send: (s) => post(s, msg({ at: 1_760_000_000 })), status: 400, code: 'invalid_request', message: '/at' },
  { name: 'at not an integer', send: (s) => post(s, msg({ at: 1_760_000_000_000.5 })), status: 400, code: 'invalid_request', message: '/at' },
  {
    name: 'at a day and more ahead',
    send: (s) => post(s, { messages: [msg({ at: Date.now() }), msg({ seq: 101, at: Date.now() + LIMITS.atMaxAheadMs + 60_000 })] }),
    status: 400,
    code: 'invalid_request',
    message: '/messages/1/at',
    names: 'ahead of the server',
  },
  { name: 'mentionAll not a boolean', send: (s) => post(s, msg({ mentionAll: 'yes' })), status: 400, code: 'invalid_request' },
  // Issue 43, what counts.
  { name: 'counts not a boolean', send: (s) => post(s, msg({ counts: 0 })), status: 400, code: 'invalid_request' },
  { name: 'recalls not seqs', send: (s) => post(s, msg({ recalls: [-1] })), status: 400, code: 'invalid_request' },
  {
    name: 'recalls over the limit',
    send: (s) => post(s, msg({ recalls: Array.from({ length: LIMITS.recallsPerMessage + 1 }, (_, i) => i + 1) })),
    status: 400,
    code: 'invalid_request',
  },
  { name: 'non-integer seq', send: (s) => post(s, msg({ seq: 100.5 })), status: 400, code: 'invalid_request' },
  { name: 'seq above 2^48', send: (s) => post(s, msg({ seq: LIMITS.maxSeq + 1 })), status: 400, code: 'invalid_request' },
  { name: 'seq 1e300', send: (s) => json(s, 'POST', '/v1/messages', `{"conv":"${CONV}","seq":1e300,"sender":"${BOB}"}`), status: 400, code: 'invalid_request' },
  { name: 'read: negative seq', send: (s) => s.api('POST', `/v1/users/${ALICE}/read`, { conv: CONV, seq: -1 }), status: 400, code: 'invalid_request' },
  { name: 'read: fractional seq', send: (s) => s.api('POST', `/v1/users/${ALICE}/read`, { conv: CONV, seq: 1.25 }), status: 400, code: 'invalid_request' },
  { name: 'read: seq above 2^48', send: (s) => s.api('POST', `/v1/users/${ALICE}/read`, { conv: CONV, seq: 2 ** 53 }), status: 400, code: 'invalid_request' },

  // Invalid ids, in bodies and paths.
  { name: 'conv id with a space', send: (s) => post(s, msg({ conv: 'room 1' })), status: 400, code: 'invalid_request' },
  { name: 'empty conv id', send: (s) => post(s, msg({ conv: '' })), status: 400, code: 'invalid_request' },
  { name: 'conv id too long', send: (s) => post(s, msg({ conv: 'x'.repeat(LIMITS.idMaxLength + 1) })), status: 400, code: 'invalid_request' },
  { name: 'mention id with a slash', send: (s) => post(s, msg({ mentions: ['a/b'] })), status: 400, code: 'invalid_request' },
  {
    name: 'members: invalid member id',
    send: (s) => s.api('PUT', `/v1/conversations/${CONV}/members`, { add: ['bad id'] }),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'members: both added and removed',
    send: (s) => s.api('PUT', `/v1/conversations/${CONV}/members`, { add: ['carol'], remove: ['carol'] }),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'members: category too long',
    send: (s) => s.api('PUT', `/v1/conversations/${CONV}/members`, { category: 'c'.repeat(LIMITS.categoryMaxLength + 1) }),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'members: invalid conv id in the path',
    send: (s) => s.api('PUT', '/v1/conversations/bad%20id/members', { add: [ALICE] }),
    status: 400,
    code: 'invalid_request',
    message: ':conv: Expected string to match',
  },
  {
    name: 'path: a bad user id is named as :uid',
    send: (s) => s.api('DELETE', `/v1/users/bad%20id/conversations/${CONV}`),
    status: 400,
    code: 'invalid_request',
    message: ':uid: Expected string to match',
  },
  {
    name: 'path: bad percent-encoding',
    send: (s) => s.api('GET', '/v1/users/%E0%A4%A/unread'),
    status: 400,
    code: 'invalid_request',
    message: ':uid: not valid percent-encoding',
  },
  { name: 'path: encoded slash in a user id', send: (s) => s.api('GET', '/v1/users/a%2Fb/unread'), status: 400, code: 'invalid_request' },
  { name: 'settings: no field', send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/${CONV}`, {}), status: 400, code: 'invalid_request' },
  {
    name: 'settings: an unknown level',
    send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { level: 'loud' }),
    status: 400,
    code: 'invalid_request',
    message: '/level',
  },
  {
    name: 'settings: muted contradicting level',
    send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { muted: true, level: 'mentions' }),
    status: 400,
    code: 'invalid_request',
    names: "muted is level 'none'",
  },
  {
    name: 'settings: muted not a boolean',
    send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { muted: 'yes' }),
    status: 400,
    code: 'invalid_request',
  },
  {
    name: 'settings: unknown field',
    send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { pinned: true }),
    status: 400,
    code: 'invalid_request',
  },
  { name: 'sync: since not a cursor', send: (s) => s.asUser(ALICE, 'GET', '/v1/sync?since=abc'), status: 400, code: 'invalid_request' },
  { name: 'sync: negative limit', send: (s) => s.asUser(ALICE, 'GET', '/v1/sync?limit=-1'), status: 400, code: 'invalid_request' },

  // Unknown conversation: 404 and nothing applied, not even the known part of a batch.
  {
    name: 'message to an unknown conversation',
    send: (s) => post(s, msg({ conv: 'nowhere' })),
    status: 404,
    code: 'unknown_conversation',
    names: 'PUT /v1/conversations/nowhere/members',
  },
  {
    name: 'batch with one unknown conversation',
    send: (s) => post(s, { messages: [msg(), msg({ seq: 101, mentions: [] }), msg({ conv: 'nowhere' })] }),
    status: 404,
    code: 'unknown_conversation',
  },
  {
    name: 'read of an unknown conversation',
    send: (s) => s.api('POST', `/v1/users/${ALICE}/read`, { conv: 'nowhere', seq: 1 }),
    status: 404,
    code: 'unknown_conversation',
    message: 'unknown conversation: nowhere',
    names: 'PUT /v1/conversations/nowhere/members',
  },
  // The conversation exists; the user is not in it: a different fix (add the member), a different code.
  {
    name: 'read by a non-member (API key)',
    send: (s) => s.api('POST', '/v1/users/mallory/read', { conv: CONV, seq: 1 }),
    status: 403,
    code: 'not_a_member',
    message: `mallory is not a member of ${CONV}`,
    names: `PUT /v1/conversations/${CONV}/members`,
  },
  {
    name: "read by a non-member (the user's own token)",
    send: (s) => s.asUser('mallory', 'POST', '/v1/users/mallory/read', { conv: CONV, seq: 1 }),
    status: 403,
    code: 'not_a_member',
  },
  {
    name: 'settings by a non-member',
    send: (s) => s.asUser('mallory', 'PUT', `/v1/users/mallory/conversations/${CONV}`, { muted: true }),
    status: 403,
    code: 'not_a_member',
  },
  {
    name: 'delete by a non-member',
    send: (s) => s.asUser('mallory', 'DELETE', `/v1/users/mallory/conversations/${CONV}`),
    status: 403,
    code: 'not_a_member',
  },
  {
    name: 'delete of an unknown conversation',
    send: (s) => s.api('DELETE', `/v1/users/${ALICE}/conversations/nowhere`),
    status: 404,
    code: 'unknown_conversation',
  },
  {
    name: 'settings of an unknown conversation',
    send: (s) => s.api('PUT', `/v1/users/${ALICE}/conversations/nowhere`, { muted: true }),
    status: 404,
    code: 'unknown_conversation',
    names: 'PUT /v1/conversations/nowhere/members',
  },

  // Routing.
  { name: 'unknown route', send: (s) => s.api('GET', '/v1/nothing-here'), status: 404, code: 'not_found', names: 'GET /openapi.json' },
  { name: 'unknown route under a user', send: (s) => s.api('GET', `/v1/users/${ALICE}/everything`), status: 404, code: 'not_found' },
  {
    name: 'wrong method: GET /v1/messages',
    send: (s) => s.api('GET', '/v1/messages'),
    status: 405,
    code: 'method_not_allowed',
    names: '/v1/messages takes POST',
  },
  { name: 'wrong method: DELETE /v1/sync', send: (s) => s.asUser(ALICE, 'DELETE', '/v1/sync'), status: 405, code: 'method_not_allowed' },
  {
    name: 'wrong method: POST on a path that takes two others',
    send: (s) => s.api('POST', `/v1/users/${ALICE}/conversations/${CONV}`, {}),
    status: 405,
    code: 'method_not_allowed',
    names: 'takes DELETE, PUT',
  },
  { name: 'wrong method: POST unread', send: (s) => s.api('POST', `/v1/users/${ALICE}/unread`, {}), status: 405, code: 'method_not_allowed' },

  // Credentials.
  { name: 'message without credentials', send: (s) => s.request('POST', '/v1/messages', { auth: 'none', body: msg() }), status: 401, code: 'unauthorized' },
  {
    name: 'message with a wrong API key',
    send: (s) => s.request('POST', '/v1/messages', { auth: { bearer: 'not-the-key-0123456789' }, body: msg() }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'message with a user JWT instead of the API key',
    send: (s) => s.request('POST', '/v1/messages', { auth: { user: BOB }, body: msg() }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'members with a user JWT',
    send: (s) => s.request('PUT', `/v1/conversations/${CONV}/members`, { auth: { user: ALICE }, body: { add: ['carol'] } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'Authorization without Bearer',
    send: (s) => s.request('GET', `/v1/users/${ALICE}/unread`, { auth: 'none', headers: { authorization: TEST_API_KEY } }),
    status: 401,
    code: 'unauthorized',
  },
  { name: 'sync without a JWT', send: (s) => s.request('GET', '/v1/sync', { auth: 'none' }), status: 401, code: 'unauthorized' },
  {
    name: 'sync with the API key (no user)',
    send: (s) => s.request('GET', '/v1/sync', { auth: 'api' }),
    status: 401,
    code: 'unauthorized',
    message: 'GET /v1/sync needs a user token (JWT), not the API key',
  },
  { name: 'sync with a garbage token', send: (s) => s.request('GET', '/v1/sync', { auth: { bearer: 'abc.def.ghi' } }), status: 401, code: 'unauthorized' },
  {
    name: 'sync with a forged JWT (other secret)',
    send: async (s) =>
      s.request('GET', '/v1/sync', { auth: { bearer: await signToken('another-secret-0123456789-0123456789', { sub: ALICE, exp: now() + 3600 }) } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'sync with an alg:none JWT',
    send: (s) => s.request('GET', '/v1/sync', { auth: { bearer: unsignedToken(ALICE) } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'sync with an HS512 JWT',
    send: async (s) => s.request('GET', '/v1/sync', { auth: { bearer: await signToken(TEST_JWT_SECRET, { sub: ALICE, exp: now() + 3600 }, 'HS512') } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'sync with an expired JWT',
    send: async (s) =>
      s.request('GET', '/v1/sync', { auth: { bearer: await signToken(TEST_JWT_SECRET, { sub: ALICE, iat: now() - 7200, exp: now() - 3600 }) } }),
    status: 401,
    code: 'token_expired',
  },
  {
    name: 'read with an expired JWT',
    send: async (s) =>
      s.request('POST', `/v1/users/${ALICE}/read`, {
        auth: { bearer: await signToken(TEST_JWT_SECRET, { sub: ALICE, exp: now() - 60 }) },
        body: { conv: CONV, seq: 100 },
      }),
    status: 401,
    code: 'token_expired',
  },
  {
    name: 'JWT without exp',
    send: async (s) => s.request('GET', '/v1/sync', { auth: { bearer: await signToken(TEST_JWT_SECRET, { sub: ALICE }) } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'JWT without sub',
    send: async (s) => s.request('GET', '/v1/sync', { auth: { bearer: await signToken(TEST_JWT_SECRET, { exp: now() + 3600 }) } }),
    status: 401,
    code: 'unauthorized',
  },
  {
    name: 'JWT whose sub is not a valid id',
    send: async (s) => s.request('GET', '/v1/sync', { auth: { bearer: await signToken(TEST_JWT_SECRET, { sub: 'a b', exp: now() + 3600 }) } }),
    status: 401,
    code: 'unauthorized',
  },

  // A user's JWT acting for another user.
  {
    name: "B's JWT reads A's unread",
    send: (s) => s.asUser(BOB, 'GET', `/v1/users/${ALICE}/unread`),
    status: 403,
    code: 'forbidden',
    names: `call /v1/users/${BOB}/..., or act for any user with the API key`,
  },
  {
    name: "B's JWT marks A's conversation read",
    send: (s) => s.asUser(BOB, 'POST', `/v1/users/${ALICE}/read`, { conv: CONV, seq: 100 }),
    status: 403,
    code: 'forbidden',
  },
  {
    name: "B's JWT deletes A's conversation",
    send: (s) => s.asUser(BOB, 'DELETE', `/v1/users/${ALICE}/conversations/${CONV}`),
    status: 403,
    code: 'forbidden',
  },
  {
    name: "B's JWT mutes A's conversation",
    send: (s) => s.asUser(BOB, 'PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { muted: true }),
    status: 403,
    code: 'forbidden',
  },
  {
    name: "B's JWT marks A's conversation unread",
    send: (s) => s.asUser(BOB, 'PUT', `/v1/users/${ALICE}/conversations/${CONV}`, { markedUnread: true }),
    status: 403,
    code: 'forbidden',
  },
];

for (const kind of ENGINES) {
  describe(`bad input is refused and changes nothing (${kind} engine)`, () => {
    let server: TestServer;
    const summaries = new Map<string, UnreadSummary>();

    const summary = async (uid: string): Promise<UnreadSummary> => {
      const res = await server.api<UnreadSummary>('GET', `/v1/users/${uid}/unread`);
      expect(res.status).toBe(200);
      return res.body;
    };

    beforeAll(async () => {
      server = await startTestServer({ engine: kind });
      expect((await server.api('PUT', `/v1/conversations/${CONV}/members`, { add: [ALICE, BOB], category: 'group' })).status).toBe(200);
      expect((await post(server, { messages: [msg({ seq: 1 }), msg({ seq: 2, mentions: [] })] })).status).toBe(200);
      expect((await server.api('POST', `/v1/users/${ALICE}/read`, { conv: CONV, seq: 1 })).status).toBe(200);
      for (const uid of [ALICE, BOB, 'mallory']) summaries.set(uid, await summary(uid));
      expect(summaries.get(ALICE)).toMatchObject({ total: 1, conversations: [{ conv: CONV, unread: 1, readSeq: 1, lastSeq: 2 }] });
    });

    afterAll(async () => {
      await server?.close();
    });

    for (const c of CASES) {
      it(`${c.name} → ${c.status} ${c.code}`, async () => {
        expect(ERROR_CODES[c.code].status, 'the case agrees with the documented status').toBe(c.status);
        const res = await c.send(server);
        expect({ status: res.status, code: (res.body as { error?: { code?: string } } | undefined)?.error?.code }, res.text).toEqual({
          status: c.status,
          code: c.code,
        });
        expect(res.contentType).toMatch(/^application\/json/);
        const message = (res.body as { error: { message: string } }).error.message;
        if (c.message) expect(message.startsWith(c.message), message).toBe(true);
        if (c.names) expect(message).toContain(c.names);
        for (const [uid, before] of summaries) expect(await summary(uid), `${uid} after "${c.name}"`).toEqual(before);
      });
    }

    it('oversize body (> 1 MiB) → 413 payload_too_large, and the connection is not left hanging', async () => {
      const body = JSON.stringify({ messages: [msg({ mentions: ['x'.repeat(100)] })], pad: 'p'.repeat(LIMITS.maxBodyBytes) });
      expect(Buffer.byteLength(body)).toBeGreaterThan(LIMITS.maxBodyBytes);
      const res = await rawPost(server.port, '/v1/messages', body, TEST_API_KEY);
      expect({ status: res.status, code: (JSON.parse(res.text) as { error: { code: string } }).error.code }).toEqual({
        status: 413,
        code: 'payload_too_large',
      });
      for (const [uid, before] of summaries) expect(await summary(uid)).toEqual(before);
    });

    it('a body of exactly 1 MiB is still read (and judged by its content)', async () => {
      const prefix = `${JSON.stringify(msg({ seq: 3 })).slice(0, -1)},"pad":"`;
      const body = `${prefix + 'p'.repeat(LIMITS.maxBodyBytes - prefix.length - 2)}"}`;
      expect(Buffer.byteLength(body)).toBe(LIMITS.maxBodyBytes);
      const res = await rawPost(server.port, '/v1/messages', body, TEST_API_KEY);
      expect({ status: res.status, code: (JSON.parse(res.text) as { error: { code: string } }).error.code }).toEqual({ status: 400, code: 'invalid_request' });
    });

    it('HEAD on a known path → 405', async () => {
      const res = await server.request('HEAD', '/v1/messages');
      expect(res.status).toBe(405);
    });

    it('with Accept: application/msgpack, an error reply is MessagePack with the same code', async () => {
      const res = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', accept: 'application/msgpack' },
        body: JSON.stringify(msg({ seq: -1 })),
      });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/msgpack');
      expect(decodeMsgpack(new Uint8Array(await res.arrayBuffer()))).toMatchObject({ error: { code: 'invalid_request' } });
      for (const [uid, before] of summaries) expect(await summary(uid)).toEqual(before);
    });

    it('the server still answers afterwards, and a valid message moves the version', async () => {
      expect((await server.request('GET', '/healthz', { auth: 'none' })).status).toBe(200);
      expect((await server.request('GET', '/readyz', { auth: 'none' })).status).toBe(200);
      const before = await summary(ALICE);
      expect((await post(server, msg({ seq: 3 }))).status).toBe(200);
      const after = await summary(ALICE);
      expect(after.version).toBeGreaterThan(before.version);
      expect(after).toMatchObject({ total: 2, mentions: 1, conversations: [{ conv: CONV, lastSeq: 3, readSeq: 1, unread: 2, mentions: 1 }] });
      const sync = await server.asUser(ALICE, 'GET', '/v1/sync');
      expect(sync.status).toBe(200);
    });
  });
}

/**
 * A POST through node:http, which (unlike fetch) reports the reply even when the server answers
 * and closes before the whole body was uploaded — what it does on 413.
 */
function rawPost(port: number, path: string, body: string, apiKey: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}`, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    // The server may close mid-upload once it has answered 413; the reply has been seen by then.
    req.on('error', (err) => reject(err));
    req.end(body);
  });
}

/** `{conv, seq, sender}` with `seq` as a MessagePack uint64 (0xcf), as encoders of typed languages send it. */
function msgpackWithUint64Seq(seq: bigint): Uint8Array {
  const str = (v: string): Buffer => Buffer.concat([Buffer.from([0xa0 | v.length]), Buffer.from(v)]);
  const int = Buffer.alloc(9);
  int[0] = 0xcf;
  int.writeBigUInt64BE(seq, 1);
  return Buffer.concat([Buffer.from([0x83]), str('conv'), str(CONV), str('seq'), int, str('sender'), str(BOB)]);
}
