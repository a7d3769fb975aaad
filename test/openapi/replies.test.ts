import { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_BADGE_HOOK_SECRET } from '../../client-demo/badge-receiver.js';
import { registerRoutes as registerDemoPage } from '../../client-demo/page-routes.js';
import { encodeMsgpack } from '../../protocol/codec.js';
import { ENDPOINTS } from '../../protocol/http-api.js';
import { LIMITS } from '../../protocol/limits.js';
import { type RunningServer, startServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { type Config, DEV_API_KEY, DEV_JWT_SECRET } from '../../server/config.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import type { MemoryUser } from '../../server/engine/memory/memory-state.js';
import type { RouteHook } from '../../server/gateway/route-hook.js';
import { badgeEvent } from '../../server/hook/badge-event.js';
import { signBody } from '../../server/hook/signature.js';
import { type EngineFault, type FaultyEngine, faultyEngine } from '../helpers/faulty-engine.js';
import { silentLogger, TEST_API_KEY, testConfig } from '../helpers/test-server.js';
import { Contract, type RawReply, type RequestSpec, send } from './contract.js';

/**
 * Real replies of every endpoint, from real servers (production credentials, and dev mode for
 * the dev-only endpoints), validated against the OpenAPI document the server serves: status,
 * media type and body, in JSON and in MessagePack. Every documented (operation, status) pair must
 * be seen; the store's failures come from a real engine behind a switch (`faulty-engine.ts`), and
 * the shutdown 503 from a real shutdown.
 */

interface Server {
  running: RunningServer;
  faulty: FaultyEngine;
  auth: Authenticator;
  /** The store behind the switch, for breaking it behind the server's back (what reconcile finds). */
  memory: MemoryEngine;
}

/** MAX_SEQ_JUMP and a small MAX_CONVERSATIONS_PER_USER, so that their 422s are real replies too. */
const CONVERSATION_CAP = 8;
const BASE = testConfig({ largeGroupThreshold: 2, maxSeqJump: 1000, maxConversationsPerUser: CONVERSATION_CAP });

/** `routes`: the dev entry's demo page (client-demo/page-routes.ts), which the OpenAPI document lists as dev-mode endpoints. */
async function start(config: Config, routes?: RouteHook): Promise<Server> {
  const memory = new MemoryEngine({ snapshotEvery: config.snapshotEvery, streamMaxLen: config.streamMaxLen });
  const faulty = faultyEngine(memory);
  const running = await startServer(config, silentLogger, faulty.engine, undefined, routes);
  return { running, faulty, auth: Authenticator.fromConfig(config), memory };
}

let prod: Server;
let dev: Server;
/** A server allowing one client request per second per user (burst 3): where the 429s are seen. */
let limited: Server;
/** A production server with the operations endpoints on their own port (OPS_PORT): where their 404s are seen. */
let split: Server;
let contract: Contract;
let alice: string;
let expired: string;

beforeAll(async () => {
  prod = await start(BASE);
  dev = await start({ ...BASE, devMode: true, apiKey: DEV_API_KEY, jwtSecret: DEV_JWT_SECRET }, registerDemoPage);
  limited = await start({ ...BASE, userBudget: { httpRequestsPerSecond: 1 } });
  split = await start({ ...BASE, opsPort: 0 });
  alice = await prod.auth.mintUserToken('alice');
  expired = await prod.auth.mintUserToken('alice', -60);
  // The dev-mode server's document: the production one plus the dev-mode endpoints (see document.test.ts).
  const served = await send(dev.running.port, { method: 'GET', path: '/openapi.json' });
  contract = await Contract.load(JSON.parse(served.body.toString('utf8')) as object);
  const setup = async (spec: RequestSpec) => expect((await send(prod.running.port, spec)).status).toBe(200);
  await setup(req('PUT', '/v1/conversations/team/members', { body: { add: ['alice', 'bob'], category: 'group' } }));
  await setup(req('PUT', '/v1/conversations/big/members', { body: { add: ['alice', 'bob', 'carol'] } })); // read-diffused: heads
  await setup(req('PUT', '/v1/conversations/side/members', { body: { add: ['carol', 'dave'] } })); // the operator's heads
  await setup(
    req('POST', '/v1/messages', {
      body: {
        messages: [
          { conv: 'team', seq: 1, sender: 'bob', mentions: ['alice'] },
          { conv: 'big', seq: 1, sender: 'bob' },
          { conv: 'side', seq: 1, sender: 'carol' },
        ],
      },
    }),
  );
});

afterAll(async () => {
  await prod?.running.close();
  await dev?.running.close();
  await limited?.running.close();
  await split?.running.close();
});

type Auth = 'api' | 'none' | 'alice' | 'expired' | 'bob';

interface RequestOptions {
  auth?: Auth;
  body?: unknown;
  /** Sent as is, with `contentType`. */
  raw?: string | Uint8Array;
  contentType?: string;
}

function req(method: string, path: string, options: RequestOptions = {}): RequestSpec {
  const headers: Record<string, string> = {};
  const auth = options.auth ?? 'api';
  if (auth !== 'none') headers.authorization = `Bearer ${auth === 'api' ? TEST_API_KEY : auth === 'alice' ? alice : auth === 'expired' ? expired : 'bob'}`;
  let body: string | Uint8Array | undefined;
  if (options.raw !== undefined) body = options.raw;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  return { method, path, headers, ...(body !== undefined ? { body } : {}) };
}

interface Case {
  op: string;
  status: number;
  name: string;
  request: () => RequestSpec;
  /** The error code expected (error replies). */
  code?: string;
  fault?: EngineFault;
  /** `split`: PORT of the server with OPS_PORT set; `splitOps`: its OPS_PORT. */
  on?: 'dev' | 'limited' | 'split' | 'splitOps';
  /** Runs before each request (JSON and MessagePack alike), e.g. to re-create what the request removes. */
  setup?: () => Promise<void>;
  /** More to check on the reply's body than the document says (that a part worth validating is there). */
  verify?: (body: unknown) => void;
}

const TOO_BIG = JSON.stringify({ conv: 'team', seq: 1, sender: 'bob', pad: 'p'.repeat(LIMITS.maxBodyBytes) });
const BAD_ID = encodeURIComponent('not an id!');

/** The failures every store-backed endpoint shares. */
function storeFailures(op: string, request: () => RequestSpec): Case[] {
  return [
    { op, status: 500, name: 'the store fails unexpectedly', request, code: 'internal', fault: 'fail' },
    { op, status: 503, name: 'the store is unreachable', request, code: 'unavailable', fault: 'down' },
  ];
}

/** The body errors every endpoint that takes a body shares. */
const badgeBody = JSON.stringify(badgeEvent('alice', 1, { total: 1, mentions: 0, categories: { default: 1 } }, null, 1_700_000_000_000));
/** A POST to the demo's badge hook receiver, signed as the hook signs (server/hook/signature.ts). */
function signedBadge(body: string, secret = DEMO_BADGE_HOOK_SECRET): RequestSpec {
  const spec = req('POST', '/demo/badge-hook', { auth: 'none', raw: body });
  const timestamp = Math.floor(Date.now() / 1000);
  return { ...spec, headers: { ...spec.headers, 'redpoint-timestamp': String(timestamp), 'redpoint-signature': signBody(secret, timestamp, body) } };
}

function bodyErrors(op: string, method: string, path: string, auth: Auth = 'api'): Case[] {
  return [
    { op, status: 400, name: 'malformed JSON', request: () => req(method, path, { auth, raw: '{"conv":', contentType: 'application/json' }), code: 'bad_json' },
    { op, status: 400, name: 'a body that breaks the schema', request: () => req(method, path, { auth, body: { unexpected: true } }), code: 'invalid_request' },
    { op, status: 413, name: 'a body over 1 MiB', request: () => req(method, path, { auth, raw: TOO_BIG }), code: 'payload_too_large' },
    {
      op,
      status: 415,
      name: 'a form body',
      request: () => req(method, path, { auth, raw: 'a=1', contentType: 'application/x-www-form-urlencoded' }),
      code: 'unsupported_media_type',
    },
  ];
}

/** Spends alice's client requests on the limited server (burst 3 at 1/s), so that her next one is refused. */
async function exhaust(): Promise<void> {
  for (let i = 0; i < 4; i++) await send(limited.running.port, req('GET', '/v1/users/alice/unread', { auth: 'alice' }));
}

/** 429 with Retry-After: a client (user token) request over the user's rate. */
function rateLimited(op: string, method: string, path: string, body?: unknown): Case {
  return {
    op,
    status: 429,
    name: 'over the user request rate',
    request: () => req(method, path, { auth: 'alice', body }),
    code: 'rate_limited',
    on: 'limited',
    setup: exhaust,
  };
}

/** The credential errors of a per-user endpoint. */
function userAuthErrors(op: string, method: string, path: (uid: string) => string, body?: unknown): Case[] {
  return [
    rateLimited(op, method, path('alice'), body),
    { op, status: 400, name: 'a malformed :uid', request: () => req(method, path(BAD_ID), { body }), code: 'invalid_request' },
    { op, status: 401, name: 'no credentials', request: () => req(method, path('alice'), { auth: 'none', body }), code: 'unauthorized' },
    { op, status: 401, name: 'an expired token', request: () => req(method, path('alice'), { auth: 'expired', body }), code: 'token_expired' },
    { op, status: 403, name: "another user's token", request: () => req(method, path('bob'), { auth: 'alice', body }), code: 'forbidden' },
  ];
}

/** The credential errors of an operator endpoint (API key only). */
function operatorAuthErrors(op: string, method: string, path: string, body?: unknown): Case[] {
  return [
    { op, status: 401, name: 'no credentials', request: () => req(method, path, { auth: 'none', body }), code: 'unauthorized' },
    { op, status: 401, name: 'a user token instead of the API key', request: () => req(method, path, { auth: 'alice', body }), code: 'unauthorized' },
  ];
}

/** A request that must succeed, as a case's setup. */
function ok(spec: RequestSpec): () => Promise<void> {
  return async () => expect((await send(prod.running.port, spec)).status).toBe(200);
}

/** Breaks bob's stored totals behind the engine's back: a finding for inspect and reconcile. */
async function breakBobsTotals(): Promise<void> {
  const bob = (prod.memory as unknown as { users: Map<string, MemoryUser> }).users.get('bob');
  if (!bob) throw new Error('no bob in the store');
  bob.total += 42;
}

function withFindings(body: unknown): void {
  expect((body as { findings: unknown[] }).findings.length).toBeGreaterThan(0);
}

const read = (uid: string) => `/v1/users/${uid}/read`;
const settings = (uid: string) => `/v1/users/${uid}/conversations/team`;
const unreadFrom = (uid: string) => `/v1/users/${uid}/conversations/team/unread-from`;
const unread = (uid: string) => `/v1/users/${uid}/unread`;
const follow = (uid: string, root: number | string) => `/v1/users/${uid}/conversations/team/threads/${root}`;
const userSettings = (uid: string) => `/v1/users/${uid}/settings`;
const receipts = (uid: string, query: string) => `/v1/users/${uid}/conversations/team/reads?${query}`;

const CASES: Case[] = [
  { op: 'postMessages', status: 200, name: 'one message', request: () => req('POST', '/v1/messages', { body: { conv: 'team', seq: 2, sender: 'bob' } }) },
  {
    op: 'postMessages',
    status: 200,
    name: 'a batch, MessagePack body',
    request: () =>
      req('POST', '/v1/messages', { raw: encodeMsgpack({ messages: [{ conv: 'team', seq: 3, sender: 'alice' }] }), contentType: 'application/msgpack' }),
  },
  ...bodyErrors('postMessages', 'POST', '/v1/messages'),
  {
    op: 'postMessages',
    status: 401,
    name: 'a user token instead of the API key',
    request: () => req('POST', '/v1/messages', { auth: 'alice', body: { conv: 'team', seq: 4, sender: 'bob' } }),
    code: 'unauthorized',
  },
  {
    op: 'postMessages',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('POST', '/v1/messages', { body: { conv: 'nowhere', seq: 1, sender: 'bob' } }),
    code: 'unknown_conversation',
  },
  {
    op: 'postMessages',
    status: 422,
    name: 'a seq far above the head (MAX_SEQ_JUMP)',
    request: () => req('POST', '/v1/messages', { body: { conv: 'team', seq: 1_700_000_000, sender: 'bob' } }),
    code: 'seq_jump',
  },
  ...storeFailures('postMessages', () => req('POST', '/v1/messages', { body: { conv: 'team', seq: 4, sender: 'bob' } })),

  { op: 'changeMembers', status: 200, name: 'add a member', request: () => req('PUT', '/v1/conversations/team/members', { body: { add: ['dave'] } }) },
  {
    op: 'changeMembers',
    status: 422,
    name: 'a user already in MAX_CONVERSATIONS_PER_USER conversations',
    setup: async () => {
      for (let i = 0; i < CONVERSATION_CAP; i++)
        await send(prod.running.port, req('PUT', `/v1/conversations/full${i}/members`, { body: { add: ['crowded'] } }));
    },
    request: () => req('PUT', '/v1/conversations/one-too-many/members', { body: { add: ['crowded'] } }),
    code: 'conversation_limit',
  },
  ...bodyErrors('changeMembers', 'PUT', '/v1/conversations/team/members'),
  {
    op: 'changeMembers',
    status: 400,
    name: 'a malformed :conv',
    request: () => req('PUT', `/v1/conversations/${BAD_ID}/members`, { body: {} }),
    code: 'invalid_request',
  },
  {
    op: 'changeMembers',
    status: 401,
    name: 'a wrong API key',
    request: () => ({ ...req('PUT', '/v1/conversations/team/members', { body: {} }), headers: { authorization: 'Bearer wrong-key-0123456789' } }),
    code: 'unauthorized',
  },
  ...storeFailures('changeMembers', () => req('PUT', '/v1/conversations/team/members', { body: {} })),

  { op: 'markRead', status: 200, name: "the user's own token", request: () => req('POST', read('alice'), { auth: 'alice', body: { conv: 'team', seq: 1 } }) },
  { op: 'markRead', status: 200, name: 'the API key, for any user', request: () => req('POST', read('bob'), { body: { conv: 'team', seq: 1 } }) },
  ...bodyErrors('markRead', 'POST', read('alice'), 'alice'),
  ...userAuthErrors('markRead', 'POST', read, { conv: 'team', seq: 1 }),
  {
    op: 'markRead',
    status: 403,
    name: 'a conversation the user is not in',
    request: () => req('POST', read('carol'), { body: { conv: 'team', seq: 1 } }),
    code: 'not_a_member',
  },
  {
    op: 'markRead',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('POST', read('carol'), { body: { conv: 'nowhere', seq: 1 } }),
    code: 'unknown_conversation',
  },
  ...storeFailures('markRead', () => req('POST', read('alice'), { auth: 'alice', body: { conv: 'team', seq: 2 } })),

  {
    op: 'markUnreadFrom',
    status: 200,
    name: "the user's own token",
    request: () => req('POST', unreadFrom('alice'), { auth: 'alice', body: { seq: 1, gen: 1 } }),
  },
  { op: 'markUnreadFrom', status: 200, name: 'the API key, without a generation', request: () => req('POST', unreadFrom('bob'), { body: { seq: 1 } }) },
  ...bodyErrors('markUnreadFrom', 'POST', unreadFrom('alice'), 'alice'),
  ...userAuthErrors('markUnreadFrom', 'POST', unreadFrom, { seq: 1 }),
  {
    op: 'markUnreadFrom',
    status: 400,
    name: "a seq above the conversation's head",
    request: () => req('POST', unreadFrom('alice'), { body: { seq: 1_000_000 } }),
    code: 'invalid_request',
  },
  {
    op: 'markUnreadFrom',
    status: 403,
    name: 'a conversation the user is not in',
    request: () => req('POST', unreadFrom('carol'), { body: { seq: 1 } }),
    code: 'not_a_member',
  },
  {
    op: 'markUnreadFrom',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('POST', '/v1/users/carol/conversations/nowhere/unread-from', { body: { seq: 1 } }),
    code: 'unknown_conversation',
  },
  ...storeFailures('markUnreadFrom', () => req('POST', unreadFrom('alice'), { auth: 'alice', body: { seq: 1 } })),

  { op: 'updateConversationSettings', status: 200, name: 'mute', request: () => req('PUT', settings('alice'), { auth: 'alice', body: { muted: true } }) },
  ...bodyErrors('updateConversationSettings', 'PUT', settings('alice'), 'alice'),
  ...userAuthErrors('updateConversationSettings', 'PUT', settings, { muted: false }),
  {
    op: 'updateConversationSettings',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('PUT', '/v1/users/alice/conversations/nowhere', { body: { muted: true } }),
    code: 'unknown_conversation',
  },
  {
    op: 'updateConversationSettings',
    status: 403,
    name: 'a conversation the user is not in',
    request: () => req('PUT', '/v1/users/carol/conversations/team', { body: { muted: true } }),
    code: 'not_a_member',
  },
  ...storeFailures('updateConversationSettings', () => req('PUT', settings('alice'), { body: { markedUnread: true } })),

  { op: 'deleteConversation', status: 200, name: 'delete', request: () => req('DELETE', '/v1/users/bob/conversations/big') },
  ...userAuthErrors('deleteConversation', 'DELETE', settings),
  {
    op: 'deleteConversation',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('DELETE', '/v1/users/alice/conversations/nowhere'),
    code: 'unknown_conversation',
  },
  {
    op: 'deleteConversation',
    status: 403,
    name: 'a conversation the user is not in',
    request: () => req('DELETE', '/v1/users/carol/conversations/team'),
    code: 'not_a_member',
  },
  ...storeFailures('deleteConversation', () => req('DELETE', settings('alice'))),

  { op: 'followThread', status: 200, name: "the user's own token", request: () => req('PUT', follow('alice', 1), { auth: 'alice' }) },
  { op: 'followThread', status: 400, name: 'a root of 0', request: () => req('PUT', follow('alice', 0)), code: 'invalid_request' },
  ...userAuthErrors('followThread', 'PUT', (uid) => follow(uid, 1)),
  { op: 'followThread', status: 403, name: 'a conversation the user is not in', request: () => req('PUT', follow('carol', 1)), code: 'not_a_member' },
  {
    op: 'followThread',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('PUT', '/v1/users/alice/conversations/nowhere/threads/1'),
    code: 'unknown_conversation',
  },
  {
    op: 'followThread',
    status: 422,
    name: 'one thread more than LIMITS.threadsFollowedPerConversation',
    setup: async () => {
      await ok(req('PUT', '/v1/conversations/threads-cap/members', { body: { add: ['frank'] } }))();
      for (let root = 1; root <= LIMITS.threadsFollowedPerConversation; root++)
        await ok(req('PUT', `/v1/users/frank/conversations/threads-cap/threads/${root}`))();
    },
    request: () => req('PUT', `/v1/users/frank/conversations/threads-cap/threads/${LIMITS.threadsFollowedPerConversation + 1}`),
    code: 'limit_exceeded',
  },
  ...storeFailures('followThread', () => req('PUT', follow('alice', 2))),

  { op: 'unfollowThread', status: 200, name: 'the API key, for any user', request: () => req('DELETE', follow('alice', 1)) },
  { op: 'unfollowThread', status: 400, name: 'a root that is no seq', request: () => req('DELETE', follow('alice', 'x')), code: 'invalid_request' },
  ...userAuthErrors('unfollowThread', 'DELETE', (uid) => follow(uid, 1)),
  ...storeFailures('unfollowThread', () => req('DELETE', follow('alice', 1))),

  { op: 'getUnread', status: 200, name: 'a user in a small and a large group', request: () => req('GET', unread('alice'), { auth: 'alice' }) },
  { op: 'getUnread', status: 200, name: 'a user never seen', request: () => req('GET', unread('zoe')) },
  ...userAuthErrors('getUnread', 'GET', unread),
  ...storeFailures('getUnread', () => req('GET', unread('alice'))),

  { op: 'sync', status: 200, name: 'first sync (snapshot)', request: () => req('GET', '/v1/sync', { auth: 'alice' }) },
  { op: 'sync', status: 200, name: 'a delta page', request: () => req('GET', '/v1/sync?since=1&limit=1', { auth: 'alice' }) },
  { op: 'sync', status: 400, name: 'a malformed since', request: () => req('GET', '/v1/sync?since=x', { auth: 'alice' }), code: 'invalid_request' },
  rateLimited('sync', 'GET', '/v1/sync'),
  { op: 'sync', status: 401, name: 'the API key (no user)', request: () => req('GET', '/v1/sync'), code: 'unauthorized' },
  { op: 'sync', status: 401, name: 'an expired token', request: () => req('GET', '/v1/sync', { auth: 'expired' }), code: 'token_expired' },
  ...storeFailures('sync', () => req('GET', '/v1/sync', { auth: 'alice' })),

  // Read receipts.
  { op: 'getUserSettings', status: 200, name: "the user's own token", request: () => req('GET', userSettings('alice'), { auth: 'alice' }) },
  ...userAuthErrors('getUserSettings', 'GET', userSettings),
  ...storeFailures('getUserSettings', () => req('GET', userSettings('alice'))),
  {
    op: 'updateUserSettings',
    status: 200,
    name: 'share reads',
    request: () => req('PUT', userSettings('alice'), { auth: 'alice', body: { shareReads: true } }),
  },
  ...bodyErrors('updateUserSettings', 'PUT', userSettings('alice'), 'alice'),
  ...userAuthErrors('updateUserSettings', 'PUT', userSettings, { shareReads: true }),
  ...storeFailures('updateUserSettings', () => req('PUT', userSettings('alice'), { body: { shareReads: true } })),
  { op: 'getReadReceipts', status: 200, name: 'seqs of a small group', request: () => req('GET', receipts('alice', 'seqs=1,2'), { auth: 'alice' }) },
  { op: 'getReadReceipts', status: 200, name: 'the latest messages', request: () => req('GET', receipts('bob', 'latest=3')) },
  {
    op: 'getReadReceipts',
    status: 400,
    name: 'neither seqs nor latest',
    request: () => req('GET', '/v1/users/alice/conversations/team/reads'),
    code: 'invalid_request',
  },
  ...userAuthErrors('getReadReceipts', 'GET', (uid) => receipts(uid, 'seqs=1')),
  {
    op: 'getReadReceipts',
    status: 403,
    name: 'a conversation the user is not in',
    request: () => req('GET', receipts('carol', 'seqs=1')),
    code: 'not_a_member',
  },
  {
    op: 'getReadReceipts',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('GET', '/v1/users/alice/conversations/nowhere/reads?seqs=1'),
    code: 'unknown_conversation',
  },
  ...storeFailures('getReadReceipts', () => req('GET', receipts('alice', 'seqs=1'))),

  { op: 'resetRead', status: 200, name: 'lower a read position', request: () => req('PUT', '/v1/users/dave/conversations/side/read', { body: { seq: 0 } }) },
  { op: 'resetRead', status: 200, name: 'to the head', request: () => req('PUT', '/v1/users/dave/conversations/side/read', { body: {} }) },
  ...bodyErrors('resetRead', 'PUT', '/v1/users/dave/conversations/side/read'),
  {
    op: 'resetRead',
    status: 400,
    name: 'a malformed :uid',
    request: () => req('PUT', `/v1/users/${BAD_ID}/conversations/side/read`, { body: {} }),
    code: 'invalid_request',
  },
  ...operatorAuthErrors('resetRead', 'PUT', '/v1/users/dave/conversations/side/read', {}),
  {
    op: 'resetRead',
    status: 403,
    name: 'not a member',
    request: () => req('PUT', '/v1/users/alice/conversations/side/read', { body: {} }),
    code: 'not_a_member',
  },
  {
    op: 'resetRead',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('PUT', '/v1/users/alice/conversations/nowhere/read', { body: {} }),
    code: 'unknown_conversation',
  },
  ...storeFailures('resetRead', () => req('PUT', '/v1/users/dave/conversations/side/read', { body: { seq: 0 } })),

  { op: 'reassertHead', status: 200, name: 'raise a head', request: () => req('PUT', '/v1/conversations/side/head', { body: { maxSeq: 3 } }) },
  ...bodyErrors('reassertHead', 'PUT', '/v1/conversations/side/head'),
  {
    op: 'reassertHead',
    status: 400,
    name: 'a malformed :conv',
    request: () => req('PUT', `/v1/conversations/${BAD_ID}/head`, { body: { maxSeq: 3 } }),
    code: 'invalid_request',
  },
  ...operatorAuthErrors('reassertHead', 'PUT', '/v1/conversations/side/head', { maxSeq: 3 }),
  {
    op: 'reassertHead',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('PUT', '/v1/conversations/nowhere/head', { body: { maxSeq: 3 } }),
    code: 'unknown_conversation',
  },
  {
    op: 'reassertHead',
    status: 422,
    name: 'a head far above the current one',
    request: () => req('PUT', '/v1/conversations/side/head', { body: { maxSeq: 5000 } }),
    code: 'seq_jump',
  },
  ...storeFailures('reassertHead', () => req('PUT', '/v1/conversations/side/head', { body: { maxSeq: 3 } })),

  {
    op: 'reassertHeads',
    status: 200,
    name: 'a known and an unknown conversation',
    request: () =>
      req('PUT', '/v1/heads', {
        body: {
          heads: [
            { conv: 'side', maxSeq: 3 },
            { conv: 'nowhere', maxSeq: 1 },
          ],
        },
      }),
  },
  ...bodyErrors('reassertHeads', 'PUT', '/v1/heads'),
  ...operatorAuthErrors('reassertHeads', 'PUT', '/v1/heads', { heads: [{ conv: 'side', maxSeq: 3 }] }),
  {
    op: 'reassertHeads',
    status: 422,
    name: 'one head far above the current one',
    request: () =>
      req('PUT', '/v1/heads', {
        body: {
          heads: [
            { conv: 'side', maxSeq: 3 },
            { conv: 'side', maxSeq: 9000 },
          ],
        },
      }),
    code: 'seq_jump',
  },
  ...storeFailures('reassertHeads', () => req('PUT', '/v1/heads', { body: { heads: [{ conv: 'side', maxSeq: 3 }] } })),

  {
    op: 'eraseUser',
    status: 200,
    name: 'a member of a conversation',
    setup: ok(req('PUT', '/v1/conversations/side/members', { body: { add: ['erin'] } })),
    request: () => req('DELETE', '/v1/users/erin'),
    verify: (body) => expect(body).toEqual({ uid: 'erin', conversations: ['side'], foundByScan: [] }),
  },
  {
    op: 'eraseUser',
    status: 200,
    name: 'with a scan of every conversation',
    setup: ok(req('PUT', '/v1/conversations/side/members', { body: { add: ['erin'] } })),
    request: () => req('DELETE', '/v1/users/erin?scan=1'),
  },
  { op: 'eraseUser', status: 400, name: 'a malformed :uid', request: () => req('DELETE', `/v1/users/${BAD_ID}`), code: 'invalid_request' },
  { op: 'eraseUser', status: 400, name: 'a scan that is not 0 or 1', request: () => req('DELETE', '/v1/users/erin?scan=yes'), code: 'invalid_request' },
  ...operatorAuthErrors('eraseUser', 'DELETE', '/v1/users/alice'),
  ...storeFailures('eraseUser', () => req('DELETE', '/v1/users/erin')),

  {
    op: 'deleteConversationForAll',
    status: 200,
    name: 'a conversation with members',
    setup: ok(req('PUT', '/v1/conversations/doomed/members', { body: { add: ['carol', 'dave'] } })),
    request: () => req('DELETE', '/v1/conversations/doomed'),
  },
  {
    op: 'deleteConversationForAll',
    status: 400,
    name: 'a malformed :conv',
    request: () => req('DELETE', `/v1/conversations/${BAD_ID}`),
    code: 'invalid_request',
  },
  ...operatorAuthErrors('deleteConversationForAll', 'DELETE', '/v1/conversations/team'),
  {
    op: 'deleteConversationForAll',
    status: 404,
    name: 'nothing to delete',
    request: () => req('DELETE', '/v1/conversations/nowhere'),
    code: 'unknown_conversation',
  },
  ...storeFailures('deleteConversationForAll', () => req('DELETE', '/v1/conversations/team')),

  {
    op: 'rebaseConversation',
    status: 200,
    name: 'a head lowered, its members with it',
    setup: ok(req('PUT', '/v1/conversations/rebased/members', { body: { add: ['carol', 'dave'] } })),
    request: () => req('POST', '/v1/admin/conversations/rebased/rebase', { body: { seq: 0 } }),
  },
  ...bodyErrors('rebaseConversation', 'POST', '/v1/admin/conversations/rebased/rebase'),
  {
    op: 'rebaseConversation',
    status: 400,
    name: 'a malformed :conv',
    request: () => req('POST', `/v1/admin/conversations/${BAD_ID}/rebase`, { body: { seq: 0 } }),
    code: 'invalid_request',
  },
  ...operatorAuthErrors('rebaseConversation', 'POST', '/v1/admin/conversations/rebased/rebase', { seq: 0 }),
  {
    op: 'rebaseConversation',
    status: 404,
    name: 'no such conversation',
    request: () => req('POST', '/v1/admin/conversations/nowhere/rebase', { body: { seq: 0 } }),
    code: 'unknown_conversation',
  },
  ...storeFailures('rebaseConversation', () => req('POST', '/v1/admin/conversations/rebased/rebase', { body: { seq: 0 } })),

  { op: 'inspectUser', status: 200, name: 'a user in a small and a large group', request: () => req('GET', '/v1/admin/users/alice') },
  { op: 'inspectUser', status: 200, name: 'a user never seen', request: () => req('GET', '/v1/admin/users/zoe') },
  {
    op: 'inspectUser',
    status: 200,
    name: 'a user whose stored totals are off',
    setup: breakBobsTotals,
    request: () => req('GET', '/v1/admin/users/bob'),
    verify: withFindings,
  },
  { op: 'inspectUser', status: 400, name: 'a malformed :uid', request: () => req('GET', `/v1/admin/users/${BAD_ID}`), code: 'invalid_request' },
  ...operatorAuthErrors('inspectUser', 'GET', '/v1/admin/users/alice'),
  ...storeFailures('inspectUser', () => req('GET', '/v1/admin/users/alice')),

  {
    op: 'reconcile',
    status: 200,
    name: 'a walk page',
    request: () => req('POST', '/v1/admin/reconcile', { body: { cursor: '', count: 2, repair: false, graceMs: 0 } }),
  },
  {
    op: 'reconcile',
    status: 200,
    name: 'a user whose stored totals are off, repaired',
    setup: breakBobsTotals,
    request: () => req('POST', '/v1/admin/reconcile', { body: { users: ['bob'], repair: true, graceMs: 0 } }),
    verify: (body) => {
      withFindings(body);
      expect((body as { unrepaired: unknown[] }).unrepaired).toEqual([]);
    },
  },
  ...bodyErrors('reconcile', 'POST', '/v1/admin/reconcile'),
  ...operatorAuthErrors('reconcile', 'POST', '/v1/admin/reconcile', { repair: false, graceMs: 0 }),
  ...storeFailures('reconcile', () => req('POST', '/v1/admin/reconcile', { body: { conversations: ['team'], repair: false, graceMs: 0 } })),

  { op: 'countIds', status: 200, name: 'users', request: () => req('GET', '/v1/admin/count?kind=users') },
  { op: 'countIds', status: 200, name: 'conversations', request: () => req('GET', '/v1/admin/count?kind=conversations') },
  { op: 'countIds', status: 400, name: 'no kind', request: () => req('GET', '/v1/admin/count'), code: 'invalid_request' },
  ...operatorAuthErrors('countIds', 'GET', '/v1/admin/count?kind=users'),
  ...storeFailures('countIds', () => req('GET', '/v1/admin/count?kind=users')),

  { op: 'userTraces', status: 200, name: 'a member', request: () => req('GET', '/v1/admin/users/alice/traces') },
  { op: 'userTraces', status: 400, name: 'a malformed :uid', request: () => req('GET', `/v1/admin/users/${BAD_ID}/traces`), code: 'invalid_request' },
  ...operatorAuthErrors('userTraces', 'GET', '/v1/admin/users/alice/traces'),
  ...storeFailures('userTraces', () => req('GET', '/v1/admin/users/alice/traces')),

  { op: 'inspectConversation', status: 200, name: 'a read-diffused conversation', request: () => req('GET', '/v1/admin/conversations/big') },
  {
    op: 'inspectConversation',
    status: 400,
    name: 'a malformed :conv',
    request: () => req('GET', `/v1/admin/conversations/${BAD_ID}`),
    code: 'invalid_request',
  },
  ...operatorAuthErrors('inspectConversation', 'GET', '/v1/admin/conversations/big'),
  {
    op: 'inspectConversation',
    status: 404,
    name: 'an unknown conversation',
    request: () => req('GET', '/v1/admin/conversations/nowhere'),
    code: 'unknown_conversation',
  },
  ...storeFailures('inspectConversation', () => req('GET', '/v1/admin/conversations/big')),

  {
    op: 'getHeads',
    status: 200,
    name: 'known and unknown conversations',
    request: () => req('POST', '/v1/admin/heads', { body: { convs: ['team', 'big', 'nowhere'] } }),
  },
  ...bodyErrors('getHeads', 'POST', '/v1/admin/heads'),
  ...operatorAuthErrors('getHeads', 'POST', '/v1/admin/heads', { convs: ['team'] }),
  ...storeFailures('getHeads', () => req('POST', '/v1/admin/heads', { body: { convs: ['team'] } })),

  {
    op: 'importBatch',
    status: 200,
    name: 'a conversation, its user lines, and a line of an unknown conversation',
    request: () =>
      req('POST', '/v1/admin/import', {
        body: {
          conversations: [{ conv: 'imported', members: ['fay', 'gus'], category: 'group', maxSeq: 5 }],
          users: [
            { uid: 'fay', conv: 'imported', readSeq: 2, muted: true },
            { uid: 'hal', conv: 'nowhere', readSeq: 1 },
          ],
        },
      }),
    verify: (body) => expect(body).toEqual({ conversations: 1, pairs: 2, unknown: [{ uid: 'hal', conv: 'nowhere' }] }),
  },
  {
    op: 'importBatch',
    status: 200,
    name: 'a dry run',
    request: () => req('POST', '/v1/admin/import', { body: { conversations: [], users: [{ uid: 'alice', conv: 'team', readSeq: 1 }], dryRun: true } }),
  },
  ...bodyErrors('importBatch', 'POST', '/v1/admin/import'),
  ...operatorAuthErrors('importBatch', 'POST', '/v1/admin/import', { conversations: [], users: [] }),
  ...storeFailures('importBatch', () => req('POST', '/v1/admin/import', { body: { conversations: [], users: [{ uid: 'alice', conv: 'team', readSeq: 1 }] } })),

  { op: 'healthz', status: 200, name: 'alive', request: () => req('GET', '/healthz', { auth: 'none' }) },
  { op: 'readyz', status: 200, name: 'ready', request: () => req('GET', '/readyz', { auth: 'none' }) },
  { op: 'readyz', status: 503, name: 'the store does not answer', request: () => req('GET', '/readyz', { auth: 'none' }), fault: 'down' },
  { op: 'metrics', status: 200, name: 'Prometheus text', request: () => req('GET', '/metrics', { auth: 'none' }) },
  { op: 'openapi', status: 200, name: 'the document', request: () => req('GET', '/openapi.json', { auth: 'none' }) },
  ...(
    [
      ['healthz', '/healthz', 'split'],
      ['readyz', '/readyz', 'split'],
      ['metrics', '/metrics', 'split'],
      ['openapi', '/openapi.json', 'splitOps'],
    ] as const
  ).map(
    ([op, path, on]): Case => ({ op, status: 404, name: 'asked on the other port', request: () => req('GET', path, { auth: 'none' }), code: 'not_found', on }),
  ),
  // A production server does not route the dev-mode endpoints.
  ...ENDPOINTS.filter((e) => e.devModeOnly).map(
    (e): Case => ({
      op: e.operationId,
      status: 404,
      name: 'on a server not in dev mode',
      request: () => req(e.method.toUpperCase(), e.path, { auth: 'none' }),
      code: 'not_found',
      on: 'split',
    }),
  ),

  { op: 'devToken', status: 200, name: 'a dev token', request: () => req('POST', '/dev/token', { auth: 'none', body: { uid: 'alice' } }), on: 'dev' },
  ...bodyErrors('devToken', 'POST', '/dev/token', 'none').map((c): Case => ({ ...c, on: 'dev' })),
  {
    op: 'reportDemoActivity',
    status: 200,
    name: 'a device saw a message',
    request: () => req('POST', '/demo/activity', { auth: 'none', body: { conv: 'team', seq: 1 } }),
    on: 'dev',
  },
  {
    op: 'reportDemoActivity',
    status: 200,
    name: 'the test tools sent messages',
    request: () =>
      req('POST', '/demo/activity', {
        auth: 'none',
        body: { conv: 'team', seq: 2, messages: [{ seq: 2, sender: 'bob', text: 'hi', mention: false, agoMs: 60_000 }] },
      }),
    on: 'dev',
  },
  {
    op: 'reportDemoActivity',
    status: 400,
    name: 'a sent message past the seq reported',
    request: () =>
      req('POST', '/demo/activity', {
        auth: 'none',
        body: { conv: 'team', seq: 1, messages: [{ seq: 3, sender: 'bob', text: '', mention: false, agoMs: 0 }] },
      }),
    code: 'invalid_request',
    on: 'dev',
  },
  ...bodyErrors('reportDemoActivity', 'POST', '/demo/activity', 'none').map((c): Case => ({ ...c, on: 'dev' })),
  { op: 'demoActivity', status: 200, name: 'the record', request: () => req('GET', '/demo/activity', { auth: 'none' }), on: 'dev' },
  // The demo's badge hook receiver (client-demo/badge-receiver.ts): signed with the dev secret.
  { op: 'receiveDemoBadgeEvent', status: 200, name: 'a signed event', request: () => signedBadge(badgeBody), on: 'dev' },
  {
    op: 'receiveDemoBadgeEvent',
    status: 401,
    name: 'a forged event',
    request: () => signedBadge(badgeBody, 'not-the-dev-secret-0123456789abcdef'),
    code: 'unauthorized',
    on: 'dev',
  },
  {
    op: 'receiveDemoBadgeEvent',
    status: 400,
    name: 'a signed body that is not a badge event',
    request: () => signedBadge(JSON.stringify({ type: 'badge', uid: 'alice', seq: 1 })),
    code: 'invalid_request',
    on: 'dev',
  },
  // Unsigned, a body that breaks the schema is refused as unsigned (the signature is checked first).
  ...bodyErrors('receiveDemoBadgeEvent', 'POST', '/demo/badge-hook', 'none')
    .filter((c) => c.code !== 'invalid_request')
    .map((c): Case => ({ ...c, on: 'dev' })),
  { op: 'demoBadgeEvents', status: 200, name: "a user's events", request: () => req('GET', '/demo/badge-events?uid=alice', { auth: 'none' }), on: 'dev' },
  { op: 'demoBadgeEvents', status: 400, name: 'no uid', request: () => req('GET', '/demo/badge-events', { auth: 'none' }), code: 'invalid_request', on: 'dev' },
  ...(
    [
      ['demoPage', '/'],
      ['demoScript', '/demo/app.js'],
      ['demoStyles', '/demo/app.css'],
    ] as const
  ).map(([op, path]): Case => ({ op, status: 200, name: 'the asset', request: () => req('GET', path, { auth: 'none' }), on: 'dev' })),
];

/**
 * Any request can be refused for its framing (400 `bad_framing`) before its route runs: one per
 * operation, its 200 request without a body and with a Transfer-Encoding other than chunked.
 */
const FRAMING_CASES: Case[] = [...new Set(CASES.map((c) => c.op))].map((op): Case => {
  const first = CASES.find((c) => c.op === op && c.status === 200);
  if (!first) throw new Error(`no 200 case for ${op}`);
  return {
    op,
    status: 400,
    name: 'ambiguous framing',
    code: 'bad_framing',
    ...(first.on ? { on: first.on } : {}),
    request: () => {
      const { body: _body, ...spec } = first.request();
      return { ...spec, headers: { ...spec.headers, 'transfer-encoding': 'gzip, chunked' } };
    },
  };
});

/**
 * Endpoints that never reach the store, so nothing a client or the store does makes them fail
 * with 500: their 500 reply is the shared error body, checked on every store-backed endpoint.
 * The demo assets' text 500 needs esbuild to be missing.
 */
const NEVER_500 = [
  'healthz',
  'readyz',
  'metrics',
  'openapi',
  'devToken',
  'demoPage',
  'demoScript',
  'demoStyles',
  'demoActivity',
  'reportDemoActivity',
  'receiveDemoBadgeEvent',
  'demoBadgeEvents',
];

/** An agent holding `count` idle keep-alive connections to the server. */
async function openConnections(port: number, count: number): Promise<Agent> {
  const agent = new Agent({ keepAlive: true, maxSockets: count });
  let free = 0;
  const allFree = new Promise<void>((resolve) => {
    agent.on('free', () => {
      if (++free === count) resolve();
    });
  });
  // Concurrent requests, so that each gets a connection of its own.
  await Promise.all(Array.from({ length: count }, () => send(port, { ...req('GET', '/healthz', { auth: 'none' }), agent })));
  await allFree;
  return agent;
}

function serverOf(c: Case): Server {
  return c.on === 'dev' ? dev : c.on === 'limited' ? limited : c.on === 'split' || c.on === 'splitOps' ? split : prod;
}

function portOf(c: Case): number {
  const server = serverOf(c).running;
  if (c.on !== 'splitOps') return server.port;
  if (server.opsPort === undefined) throw new Error('the split server has no OPS_PORT listener');
  return server.opsPort;
}

async function checked(c: Case, accept: string): Promise<unknown> {
  const server = serverOf(c);
  await c.setup?.();
  const spec = c.request();
  server.faulty.fault = c.fault ?? 'none';
  let reply: RawReply;
  try {
    reply = await send(portOf(c), { ...spec, headers: { ...spec.headers, accept } });
  } finally {
    server.faulty.fault = 'none';
  }
  expect(reply.status, `${c.op}: ${c.name} (${accept}) → ${reply.body.toString('utf8', 0, 200)}`).toBe(c.status);
  const body = contract.check(c.op, reply);
  if (c.code) expect((body as { error: { code: string } }).error.code).toBe(c.code);
  c.verify?.(body);
  return body;
}

describe('every reply of every endpoint matches the OpenAPI document', () => {
  for (const c of [...CASES, ...FRAMING_CASES]) {
    it(`${c.op} ${c.status}: ${c.name}`, async () => {
      const spec = c.request();
      if (c.status === 200 && typeof spec.body === 'string') contract.checkRequest(c.op, JSON.parse(spec.body));
      await checked(c, 'application/json');
      await checked(c, 'application/msgpack');
    });
  }

  it('404 and 405 (no operation) carry the common error body', async () => {
    contract.checkError(await send(prod.running.port, req('GET', '/v1/nothing-here')), 'not_found');
    contract.checkError(await send(prod.running.port, { ...req('GET', '/v1/messages'), headers: { accept: 'application/msgpack' } }), 'method_not_allowed');
  });

  it('during a graceful shutdown every endpoint answers 503 unavailable', async () => {
    for (const server of [prod, dev]) {
      const opsHere = [...new Set(CASES.filter((c) => serverOf(c) === server).map((c) => c.op))];
      // Connections opened before the shutdown survive the listen socket; one per request, since
      // a refused request with a body closes its connection.
      const agent = await openConnections(server.running.port, opsHere.length * 2);
      const release = server.faulty.holdClose();
      const closed = server.running.close();
      try {
        for (const op of opsHere) {
          const first = CASES.find((c) => c.op === op && c.status === 200);
          if (!first) throw new Error(`no 200 case for ${op}`);
          for (const accept of ['application/json', 'application/msgpack']) {
            const spec = first.request();
            const reply = await send(server.running.port, { ...spec, headers: { ...spec.headers, accept }, agent });
            expect(reply.status, op).toBe(503);
            expect((contract.check(op, reply) as { error: { code: string } }).error.code).toBe('unavailable');
          }
        }
      } finally {
        release();
        agent.destroy();
        await closed;
      }
    }
  });

  it('every documented (operation, status) was seen', () => {
    const expected = contract.documented().filter((pair) => !NEVER_500.some((op) => pair === `${op} 500`));
    expect(expected.filter((pair) => !contract.seen.has(pair))).toEqual([]);
  });
});
