import type { Logger } from 'pino';
import {
  CountQuery,
  EraseQuery,
  HeadBody,
  HeadsBody,
  HeadsQueryBody,
  ImportBody,
  RebaseBody,
  ReconcileBody,
  ResetReadBody,
} from '../../protocol/admin-schemas.js';
import { RedpointError } from '../../protocol/errors.js';
import { decode } from '../../protocol/schemas.js';
import type { Toolbox } from '../admin/toolbox.js';
import type { Authenticator } from '../auth/tokens.js';
import type { Metrics } from '../metrics/metrics.js';
import type { SeqGuard } from '../sync/seq-guard.js';
import { apiKeyAuthorization, param } from './api-routes.js';
import type { HttpRouter } from './http.js';

interface AdminDeps {
  toolbox: Toolbox;
  auth: Authenticator;
  metrics: Metrics;
  seqGuard: SeqGuard;
  log: Logger;
}

/**
 * The operator's endpoints (PROTOCOL.md "Operator endpoints"), API key only: re-asserting heads,
 * erasing a user, deleting a conversation for everyone, and what the `redpoint` CLI needs to
 * reconcile, inspect and import into a store it cannot reach itself (the memory engine's).
 */
export function registerAdminRoutes(router: HttpRouter, { toolbox, auth, metrics, seqGuard, log }: AdminDeps): string[] {
  const apiKey = apiKeyAuthorization(auth, metrics).service;
  const body = { body: true, authorize: apiKey } as const;

  router.route(
    'put',
    '/v1/conversations/:conv/head',
    async (ctx) => {
      const conv = param(ctx, 0);
      const { maxSeq } = decode(HeadBody, ctx.body);
      await seqGuard.check([{ conv, seq: maxSeq }]);
      const result = await toolbox.reassertHeads([{ conv, maxSeq }]);
      const head = result.heads[0];
      if (!head) throw new RedpointError('unknown_conversation', `unknown conversation: ${conv}`);
      return { body: head };
    },
    body,
  );

  router.route(
    'put',
    '/v1/heads',
    async (ctx) => {
      const { heads } = decode(HeadsBody, ctx.body);
      await seqGuard.check(heads.map((h) => ({ conv: h.conv, seq: h.maxSeq })));
      return { body: await toolbox.reassertHeads(heads) };
    },
    body,
  );

  router.route(
    'del',
    '/v1/users/:uid',
    async (ctx) => {
      const uid = param(ctx, 0);
      const { scan } = decode(EraseQuery, Object.fromEntries(ctx.query));
      return { body: await toolbox.eraseUser(uid, { scan: scan === '1' }) };
    },
    { authorize: apiKey },
  );

  router.route(
    'del',
    '/v1/conversations/:conv',
    async (ctx) => {
      const conv = param(ctx, 0);
      const result = await toolbox.deleteConversation(conv);
      if (!result) throw new RedpointError('unknown_conversation', `unknown conversation: ${conv}`);
      return { body: result };
    },
    { authorize: apiKey },
  );

  router.route(
    'put',
    '/v1/users/:uid/conversations/:conv/read',
    async (ctx) => {
      const uid = param(ctx, 0);
      const conv = param(ctx, 1);
      const { seq } = decode(ResetReadBody, ctx.body);
      const result = await toolbox.resetRead(uid, conv, seq);
      metrics.readResets.inc({ outcome: result.changed ? 'lowered' : 'unchanged' });
      // The audit trail of an operator action: who (the API key's name), whom, and to where.
      log.info(
        { uid, conv, seq: seq ?? 'head', readSeq: result.state?.readSeq, changed: result.changed, apiKey: ctx.apiKeyName },
        `reset-read: ${uid} in ${conv} ${result.changed ? `lowered to ${result.state?.readSeq}` : `unchanged at ${result.state?.readSeq}`}`,
      );
      return { body: result };
    },
    body,
  );

  router.route(
    'post',
    '/v1/admin/conversations/:conv/rebase',
    async (ctx) => {
      const conv = param(ctx, 0);
      const { seq } = decode(RebaseBody, ctx.body);
      const result = await toolbox.rebase(conv, seq);
      if (!result) throw new RedpointError('unknown_conversation', `unknown conversation: ${conv}`);
      seqGuard.forget(conv);
      // The audit trail of the one operator act that lowers a head.
      log.info({ ...result, apiKey: ctx.apiKeyName }, `rebase: ${conv} head ${result.before} -> ${result.head}, ${result.members} members`);
      return { body: result };
    },
    body,
  );

  router.route('post', '/v1/admin/reconcile', async (ctx) => ({ body: await toolbox.reconcile(decode(ReconcileBody, ctx.body)) }), body);

  router.route('get', '/v1/admin/count', async (ctx) => ({ body: { count: await toolbox.count(decode(CountQuery, Object.fromEntries(ctx.query)).kind) } }), {
    authorize: apiKey,
  });

  router.route('get', '/v1/admin/users/:uid', async (ctx) => ({ body: await toolbox.inspectUser(param(ctx, 0)) }), { authorize: apiKey });

  router.route('get', '/v1/admin/users/:uid/traces', async (ctx) => ({ body: await toolbox.traces(param(ctx, 0)) }), { authorize: apiKey });

  router.route(
    'get',
    '/v1/admin/conversations/:conv',
    async (ctx) => {
      const conv = param(ctx, 0);
      const found = await toolbox.inspectConversation(conv);
      if (!found) throw new RedpointError('unknown_conversation', `unknown conversation: ${conv}`);
      return { body: found };
    },
    { authorize: apiKey },
  );

  // A read that takes a body (up to 1000 ids): the endpoint table marks it `write: false`, so its
  // store errors are `unavailable`, never `outcome_unknown`.
  router.route('post', '/v1/admin/heads', async (ctx) => ({ body: { heads: await toolbox.heads(decode(HeadsQueryBody, ctx.body).convs) } }), body);

  router.route(
    'post',
    '/v1/admin/import',
    async (ctx) => {
      const batch = decode(ImportBody, ctx.body);
      return { body: await toolbox.importBatch({ conversations: batch.conversations, users: batch.users }, batch.dryRun === true) };
    },
    body,
  );

  return [
    '/v1/conversations/:conv/head',
    '/v1/heads',
    '/v1/users/:uid',
    '/v1/conversations/:conv',
    '/v1/users/:uid/conversations/:conv/read',
    '/v1/admin/conversations/:conv/rebase',
    '/v1/admin/reconcile',
    '/v1/admin/count',
    '/v1/admin/users/:uid',
    '/v1/admin/users/:uid/traces',
    '/v1/admin/conversations/:conv',
    '/v1/admin/heads',
    '/v1/admin/import',
  ];
}
