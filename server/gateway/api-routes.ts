import type { TString } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { threadConv } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import { LIMITS } from '../../protocol/limits.js';
import {
  ConvRef,
  decode,
  decodeMessages,
  Id,
  MembersBody,
  ReadBody,
  ReadsQuery,
  SettingsBody,
  SyncQuery,
  UnreadFromBody,
  UserSettingsBody,
} from '../../protocol/schemas.js';
import type { Cursor, MessageEvent } from '../../protocol/types.js';
import { type Authenticator, bearer, looksLikeJwt } from '../auth/tokens.js';
import type { UserOpResult } from '../engine/engine.js';
import type { Metrics } from '../metrics/metrics.js';
import type { SeqGuard } from '../sync/seq-guard.js';
import type { SyncService } from '../sync/sync-service.js';
import type { Authorize, HttpRouter, Reply, RequestContext } from './http.js';
import { syncBodyPieces } from './sync-body.js';
import { pullCost, type UserBudgets } from './user-budget.js';

interface ApiDeps {
  sync: SyncService;
  auth: Authenticator;
  metrics: Metrics;
  /** Seq sanity (MAX_SEQ_JUMP), checked before a message batch is applied. */
  seqGuard?: SeqGuard;
  /** Per-user request rate and cost budget of client (user token) requests, shared with the sockets. */
  budgets: UserBudgets;
}

/**
 * The API key checks of the service and operator endpoints: `isApiKey` for routes a user token may
 * also call, `service` for API-key-only routes. The key's name goes to the request log and to
 * `redpoint_api_key_requests`.
 */
export function apiKeyAuthorization(
  auth: Authenticator,
  metrics: Metrics,
): { isApiKey: (ctx: RequestContext, credential: string) => boolean; service: Authorize } {
  const isApiKey = (ctx: RequestContext, credential: string): boolean => {
    ctx.apiKeyName = auth.apiKeyName(credential);
    if (ctx.apiKeyName !== null) metrics.apiKeyRequestCounts.add(ctx.apiKeyName);
    return ctx.apiKeyName !== null;
  };
  const service: Authorize = (ctx) => {
    const credential = bearer(ctx.authorization);
    if (!credential) throw missingCredential('the API key');
    if (!isApiKey(ctx, credential)) throw auth.apiKeyRefusal(credential, route(ctx), false);
    return null;
  };
  return { isApiKey, service };
}

/** The HTTP API of PROTOCOL.md: message service endpoints (API key) and client endpoints (JWT). */
export function registerApiRoutes(router: HttpRouter, { sync, auth, metrics, seqGuard, budgets }: ApiDeps): string[] {
  const { isApiKey, service } = apiKeyAuthorization(auth, metrics);

  /** For `/v1/users/:uid/...`: the API key may act for any user; a user's JWT only for that user. */
  const actingForUser: Authorize = async (ctx) => {
    const uid = param(ctx, 0);
    const credential = bearer(ctx.authorization);
    if (!credential) throw missingCredential('the API key or the user token');
    if (isApiKey(ctx, credential)) return null;
    if (!looksLikeJwt(credential)) throw auth.apiKeyRefusal(credential, route(ctx), true);
    const subject = await auth.verifyUserToken(credential);
    if (subject !== uid)
      throw new RedpointError(
        'forbidden',
        `a user token may only act for its own user (its sub is ${subject}): call /v1/users/${subject}/..., or act for any user with the API key`,
      );
    // Client requests are rate limited per user (429 with Retry-After); the message service's are not.
    budgets.request(subject);
    return subject;
  };

  const user: Authorize = async (ctx) => {
    const credential = bearer(ctx.authorization);
    if (!credential) throw missingCredential('a user token (JWT)');
    const { uid: subject } = await auth.verifyUserOnly(credential, route(ctx));
    budgets.request(subject);
    return subject;
  };

  /** A costly read for a user token: charged to the user's budget (shared with their sockets). */
  async function charged<T>(subject: string | null, kind: string, read: () => Promise<T>, cost: (result: T) => number): Promise<T> {
    if (subject === null) return read();
    const ticket = budgets.admit(subject, kind);
    let spent: number | undefined;
    try {
      const result = await read();
      spent = cost(result);
      return result;
    } finally {
      budgets.settle(ticket, spent);
    }
  }

  router.route(
    'post',
    '/v1/messages',
    async (ctx) => {
      const messages: MessageEvent[] = decodeMessages(ctx.body);
      // Off by default (MAX_SEQ_JUMP 0): no promise to wait on then.
      if (seqGuard?.enabled) await seqGuard.check(messages);
      await sync.postMessages(messages);
      metrics.ingestMessageCounts.add('', messages.length);
      return { body: { ok: true, accepted: messages.length } };
    },
    { body: true, authorize: service },
  );

  router.route(
    'put',
    '/v1/conversations/:conv/members',
    async (ctx) => {
      const conv = param(ctx, 0);
      const body = decode(MembersBody, ctx.body);
      const result = await sync.changeMembers(conv, {
        add: body.add ?? [],
        remove: body.remove ?? [],
        ...(body.category !== undefined ? { category: body.category } : {}),
      });
      return { body: { conv, members: result.members, large: result.large } };
    },
    { body: true, authorize: service },
  );

  router.route(
    'post',
    '/v1/users/:uid/read',
    async (ctx) => {
      const uid = param(ctx, 0);
      const body = decode(ReadBody, ctx.body);
      return { body: changeReply(await sync.read(uid, body.conv, body.seq, body.gen)) };
    },
    { body: true, authorize: actingForUser },
  );

  router.route(
    'post',
    '/v1/users/:uid/conversations/:conv/unread-from',
    async (ctx) => {
      const uid = param(ctx, 0);
      const body = decode(UnreadFromBody, ctx.body);
      return { body: changeReply(await sync.unreadFrom(uid, convParam(ctx, 1), body.seq, body.gen)) };
    },
    { body: true, authorize: actingForUser },
  );

  router.route(
    'del',
    '/v1/users/:uid/conversations/:conv',
    async (ctx) => {
      const uid = param(ctx, 0);
      return { body: changeReply(await sync.deleteConversation(uid, convParam(ctx, 1))) };
    },
    { authorize: actingForUser },
  );

  router.route(
    'put',
    '/v1/users/:uid/conversations/:conv',
    async (ctx) => {
      const uid = param(ctx, 0);
      const body = decode(SettingsBody, ctx.body);
      return { body: changeReply(await sync.updateSettings(uid, convParam(ctx, 1), body)) };
    },
    { body: true, authorize: actingForUser },
  );

  // PUT follows the thread, DELETE unfollows it (PROTOCOL.md "Threads").
  for (const [method, following] of [
    ['put', true],
    ['del', false],
  ] as const) {
    router.route(
      method,
      '/v1/users/:uid/conversations/:conv/threads/:root',
      async (ctx) => {
        const uid = param(ctx, 0);
        const conv = param(ctx, 1);
        const root = rootParam(ctx, 2);
        const changed = following ? (await sync.followThread(uid, conv, root)) === 'followed' : await sync.unfollowThread(uid, conv, root);
        return { body: { conv: threadConv(conv, root), following, changed } };
      },
      { authorize: actingForUser },
    );
  }

  router.route(
    'get',
    '/v1/users/:uid/unread',
    async (ctx) => {
      const uid = param(ctx, 0);
      return {
        body: await charged(
          ctx.subject,
          'unread',
          () => sync.unread(uid),
          (u) => 1 + u.conversations.length,
        ),
      };
    },
    { authorize: actingForUser },
  );

  router.route(
    'get',
    '/v1/sync',
    async (ctx): Promise<Reply> => {
      const uid = ctx.subject;
      if (uid === null) throw new RedpointError('unauthorized', 'a user token is required');
      const query = decode(SyncQuery, Object.fromEntries(ctx.query));
      const limit = query.limit === undefined ? LIMITS.pullPageDefault : Number(query.limit);
      const since = parseSince(query.since, ctx.query.get('epoch'));
      const reply = await charged(uid, since ? 'delta' : 'snapshot', () => sync.pull(uid, since, limit), pullCost);
      metrics.pulls.inc({ kind: reply.snapshot ? 'snapshot' : 'delta', transport: 'http' });
      return { body: reply, pieces: (msgpack) => syncBodyPieces(reply, msgpack) };
    },
    { authorize: user },
  );

  // Read receipts (issue 44).
  router.route(
    'get',
    '/v1/users/:uid/settings',
    async (ctx) => {
      const uid = param(ctx, 0);
      const [shareReads, mutedMentions] = await Promise.all([sync.receipts.sharing(uid), sync.engine.readPositions.mutedMentions(uid)]);
      return { body: { uid, shareReads, mutedMentions } };
    },
    { authorize: actingForUser },
  );

  router.route(
    'put',
    '/v1/users/:uid/settings',
    async (ctx) => {
      const uid = param(ctx, 0);
      const body = decode(UserSettingsBody, ctx.body);
      await sync.setUserSettings(uid, body);
      const [shareReads, mutedMentions] = await Promise.all([sync.receipts.sharing(uid), sync.engine.readPositions.mutedMentions(uid)]);
      return { body: { uid, shareReads, mutedMentions } };
    },
    { body: true, authorize: actingForUser },
  );

  router.route(
    'get',
    '/v1/users/:uid/conversations/:conv/reads',
    async (ctx) => {
      const uid = param(ctx, 0);
      const conv = convParam(ctx, 1);
      const query = decode(ReadsQuery, Object.fromEntries(ctx.query));
      if ((query.seqs === undefined) === (query.latest === undefined))
        throw new RedpointError('invalid_request', 'ask either seqs=<seq,seq,...> or latest=<n>');
      const ask = query.seqs !== undefined ? { seqs: query.seqs.split(',').map(Number) } : { latest: Number(query.latest) };
      return {
        body: await charged(
          ctx.subject,
          'reads',
          () => sync.receipts.readBy(uid, conv, ask),
          (r) => 1 + r.seqs.length,
        ),
      };
    },
    { authorize: actingForUser },
  );

  return [
    '/v1/messages',
    '/v1/conversations/:conv/members',
    '/v1/users/:uid/read',
    '/v1/users/:uid/conversations/:conv',
    '/v1/users/:uid/conversations/:conv/unread-from',
    '/v1/users/:uid/unread',
    '/v1/sync',
    '/v1/users/:uid/settings',
    '/v1/users/:uid/conversations/:conv/reads',
    '/v1/users/:uid/conversations/:conv/threads/:root',
  ];
}

const checkPathId = TypeCompiler.Compile(Id);
const checkConvRef = TypeCompiler.Compile(ConvRef);

function route(ctx: RequestContext): string {
  return `${ctx.method.toUpperCase()} ${ctx.url}`;
}

function missingCredential(wanted: string): RedpointError {
  return new RedpointError('unauthorized', `no credential: send ${wanted} as Authorization: Bearer <credential>`, 'missing');
}

export function param(ctx: RequestContext, index: number): string {
  return checkedParam(ctx, index, checkPathId);
}

/** A user operation's `:conv`: a conversation id or a topic's `<conv>#t:<topic>` (`#` sent as `%23`; PROTOCOL.md "Topics"). */
function convParam(ctx: RequestContext, index: number): string {
  return checkedParam(ctx, index, checkConvRef);
}

/** A thread's `:root`: the root message's seq, a positive integer (PROTOCOL.md "Threads"). */
function rootParam(ctx: RequestContext, index: number): number {
  const raw = ctx.params[index] ?? '';
  const root = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(root >= 1 && root <= LIMITS.maxSeq)) {
    throw new RedpointError('invalid_request', `:root: the thread's root message seq, an integer from 1 to ${LIMITS.maxSeq} (got '${raw.slice(0, 40)}')`);
  }
  return root;
}

function checkedParam(ctx: RequestContext, index: number, check: TypeCheck<TString>): string {
  // Named as the route writes it (`:uid`), so a bad id says which part of the path is wrong.
  const name = `:${ctx.paramNames[index] ?? `parameter ${index + 1}`}`;
  let raw = ctx.params[index] ?? '';
  try {
    raw = decodeURIComponent(raw);
  } catch {
    throw new RedpointError('invalid_request', `${name}: not valid percent-encoding`);
  }
  if (check.Check(raw)) return raw;
  const first = check.Errors(raw).First();
  throw new RedpointError('invalid_request', `${name}: ${first?.message ?? 'invalid id'}`);
}

/**
 * `since=<epoch>:<version>` (or `since=<version>&epoch=<epoch>`) continues a cursor; a bare
 * version trusts the current epoch (empty epoch = wildcard). No `since`: start from a snapshot.
 */
function parseSince(since: string | undefined, epochParam: string | null): Cursor | null {
  if (since === undefined) return null;
  const colon = since.lastIndexOf(':');
  const epoch = colon >= 0 ? since.slice(0, colon) : (epochParam ?? '');
  const version = Number(colon >= 0 ? since.slice(colon + 1) : since);
  if (!Number.isSafeInteger(version)) throw new RedpointError('invalid_request', 'since: not an integer version');
  return { epoch, version };
}

function changeReply(result: UserOpResult): object {
  return { changed: result.changed, epoch: result.epoch, version: result.version, state: result.state };
}
