import type { TObject, TSchema } from '@sinclair/typebox';
import {
  AdminHeadsReplySchema,
  ConversationInspectionSchema,
  CountReplySchema,
  DeleteConversationReplySchema,
  EraseReplySchema,
  HeadsReplySchema,
  ImportReplySchema,
  RebaseReplySchema,
  ReconcilePageSchema,
  UserInspectionSchema,
  UserTracesSchema,
} from './admin-replies.js';
import { CountQuery, EraseQuery, Head, HeadBody, HeadsBody, HeadsQueryBody, ImportBody, RebaseBody, ReconcileBody, ResetReadBody } from './admin-schemas.js';
import { ERROR_CODES, type ErrorCode } from './errors.js';
import {
  ChangeReplySchema,
  DemoActivityReplySchema,
  DemoBadgeEventBodySchema,
  DemoBadgeEventsQuery,
  DemoBadgeEventsReplySchema,
  DemoBadgeHookReplySchema,
  DevTokenReplySchema,
  FollowReplySchema,
  HealthReplySchema,
  MembersReplySchema,
  MessagesReplySchema,
  OpenApiReplySchema,
  PullReplySchema,
  ReadReceiptsReplySchema,
  ReadyReplySchema,
  UnreadSummarySchema,
  UserSettingsReplySchema,
} from './replies.js';
import {
  DemoActivityBody,
  DevTokenBody,
  MembersBody,
  MessagesBody,
  ReadBody,
  ReadsQuery,
  SettingsBody,
  SyncQuery,
  UnreadFromBody,
  UserSettingsBody,
} from './schemas.js';

/**
 * Every HTTP endpoint as data: the OpenAPI document (`/openapi.json`, `protocol/openapi.json`)
 * is generated from this table, and the contract test checks that the server serves exactly these
 * routes and that every reply matches. Adding an endpoint is one entry here (then
 * `npm run openapi`, and a request for it in `test/openapi/replies.test.ts`).
 */

/** The credentials an endpoint accepts; any one of them suffices. */
type Credential = 'apiKey' | 'userToken';

export type Reply =
  /** A JSON (or MessagePack, on `Accept: application/msgpack`) body. */
  | { status: number; description: string; schema: TSchema }
  /** A text body of this media type, whatever `Accept` says. */
  | { status: number; description: string; mediaType: string };

export interface Endpoint {
  method: 'get' | 'post' | 'put' | 'delete';
  /** As the router and PROTOCOL.md write it: `:name` for a path parameter (an id). */
  path: string;
  operationId: string;
  tag: 'message service' | 'client' | 'operator' | 'operations' | 'dev mode';
  summary: string;
  description?: string;
  /** Empty: no credential (the operations endpoints and the dev-mode helpers). */
  auth: readonly Credential[];
  query?: TObject;
  body?: TSchema;
  replies: readonly Reply[];
  /**
   * Error codes this endpoint answers beyond those that follow from its shape (see
   * `errorCodesOf`): credentials, a body, path or query parameters, and the store.
   */
  errors?: readonly ErrorCode[];
  /** Served only in dev mode (no credentials configured, loopback only). */
  devModeOnly?: true;
  /** A POST that only reads (the route's `write: false`): its store errors are never `outcome_unknown`. */
  write?: false;
}

const OPERATOR: Pick<Endpoint, 'tag' | 'auth'> = { tag: 'operator', auth: ['apiKey'] };

/** Where `/healthz`, `/readyz` and `/metrics` are not: the ops paths' real 404 (`server/app.ts`). */
const ON_OPS_PORT = 'With OPS_PORT set, served on that port only: PORT then answers `404 not_found`.';

/** PROTOCOL.md "Operator endpoints": for the message service and operators, and the `redpoint` CLI's `/v1/admin/...`. */
const OPERATOR_ENDPOINTS: readonly Endpoint[] = [
  {
    ...OPERATOR,
    method: 'put',
    path: '/v1/conversations/:conv/head',
    operationId: 'reassertHead',
    summary: "Re-assert a conversation's head",
    description:
      "After the store lost writes: what a message at `maxSeq` from no one in particular would do (members of a write-diffused conversation get their lastSeq raised; nobody's readSeq moves). Max-merged: a lower `maxSeq` changes nothing. Nothing is created for an unknown conversation. `MAX_SEQ_JUMP` applies as for messages.",
    body: HeadBody,
    replies: [{ status: 200, description: "The conversation's head after the call (at least `maxSeq`).", schema: Head }],
    errors: ['unknown_conversation', 'seq_jump', 'limit_exceeded'],
  },
  {
    ...OPERATOR,
    method: 'put',
    path: '/v1/heads',
    operationId: 'reassertHeads',
    summary: "Re-assert many conversations' heads",
    description:
      'The bulk form of `PUT /v1/conversations/{conv}/head`. Unknown conversations do not fail the request; a seq jump in any entry refuses all of it.',
    body: HeadsBody,
    replies: [{ status: 200, description: 'The heads after the call, and the conversations that do not exist.', schema: HeadsReplySchema }],
    errors: ['seq_jump'],
  },
  {
    ...OPERATOR,
    method: 'delete',
    path: '/v1/users/:uid',
    operationId: 'eraseUser',
    summary: 'Erase a user everywhere',
    description:
      'Removes the user from every conversation its records name (as a membership change would), then deletes all its state in one step. `scan=1` also walks every conversation for the id. Safe to retry; a user never seen is erased too.',
    query: EraseQuery,
    replies: [{ status: 200, description: 'The conversations the user was removed from.', schema: EraseReplySchema }],
  },
  {
    ...OPERATOR,
    method: 'delete',
    path: '/v1/conversations/:conv',
    operationId: 'deleteConversationForAll',
    summary: 'Delete a conversation for all its members',
    description:
      'From its first step the conversation does not exist (a message gets 404, a membership change creates a new one); every member loses it, with its share of every total. A retry finishes a call that failed halfway; `404` after a lost reply means done.',
    replies: [{ status: 200, description: 'How many members the deletion removed, and its generation.', schema: DeleteConversationReplySchema }],
    errors: ['unknown_conversation'],
  },
  {
    ...OPERATOR,
    method: 'put',
    path: '/v1/users/:uid/conversations/:conv/read',
    operationId: 'resetRead',
    summary: "Lower a user's read position (undo a read that went too far)",
    description:
      "Lowers the user's readSeq in the conversation to `seq` (absent: the conversation's head now), never below where it was deleted; never raises it. It is the user's \"unread from here\" at `seq + 1` under the next read generation (POST /v1/users/:uid/conversations/:conv/unread-from): a read a device made before it cannot undo it, and the mentions above `seq` the server still keeps count again. The user's devices get it as an ordinary change. Logged and counted (`redpoint_read_resets_total`). Retry-safe.",
    body: ResetReadBody,
    replies: [{ status: 200, description: "The change reply: the user's position after, and the conversation's state.", schema: ChangeReplySchema }],
    errors: ['unknown_conversation', 'not_a_member'],
  },
  {
    ...OPERATOR,
    method: 'post',
    path: '/v1/admin/conversations/:conv/rebase',
    operationId: 'rebaseConversation',
    summary: "Lower a conversation's head that went wrong, with every member's state",
    description:
      "The repair of a head raised by a message id or a timestamp sent as a seq: the head becomes the lower of it and `seq` (0: start over), and every member's lastSeq becomes the new head, with readSeq, deletedSeq and mentions at most it, under a new generation that a late message from before cannot undo. Messages keep flowing meanwhile; one at or below the new head counts. Every member's stream starts over (new epoch: clients take a snapshot). Repeating it lowers to `seq` again: only safe while no message above `seq` arrived since. Logged.",
    body: RebaseBody,
    replies: [{ status: 200, description: 'The head before and after, the generation and how many members were rebased.', schema: RebaseReplySchema }],
    errors: ['unknown_conversation'],
  },
  {
    ...OPERATOR,
    method: 'post',
    path: '/v1/admin/reconcile',
    operationId: 'reconcile',
    summary: 'Check (and repair) a page of the store, or the given ids',
    description:
      'One page of a walk from `cursor`, or the `users` (or `conversations`) named. A finding counts if it is still there `graceMs` later; with `repair` it is repaired.',
    body: ReconcileBody,
    replies: [{ status: 200, description: 'What the page found and did, and where the walk goes on.', schema: ReconcilePageSchema }],
  },
  {
    ...OPERATOR,
    method: 'get',
    path: '/v1/admin/count',
    operationId: 'countIds',
    summary: 'How many users or conversations a walk meets',
    description: 'A walk of its own (for progress bars).',
    query: CountQuery,
    replies: [{ status: 200, description: 'The count.', schema: CountReplySchema }],
  },
  {
    ...OPERATOR,
    method: 'get',
    path: '/v1/admin/users/:uid',
    operationId: 'inspectUser',
    summary: 'Inspect a user',
    description:
      'Everything stored for the user, as stored and as shown, and the reconcile checks on it now. A user never seen is `seen: false`, not an error.',
    replies: [{ status: 200, description: "The user's inspection.", schema: UserInspectionSchema }],
  },
  {
    ...OPERATOR,
    method: 'get',
    path: '/v1/admin/users/:uid/traces',
    operationId: 'userTraces',
    summary: 'What still names a user',
    description: 'Its own state, and the conversations listing it (a walk over every conversation): nothing after an erase.',
    replies: [{ status: 200, description: 'The traces of the user.', schema: UserTracesSchema }],
  },
  {
    ...OPERATOR,
    method: 'get',
    path: '/v1/admin/conversations/:conv',
    operationId: 'inspectConversation',
    summary: 'Inspect a conversation',
    description: 'Its stored fields and its first 100 members (by id) with their join tags; also a deletion not finished.',
    replies: [{ status: 200, description: "The conversation's inspection.", schema: ConversationInspectionSchema }],
    errors: ['unknown_conversation'],
  },
  {
    ...OPERATOR,
    method: 'post',
    path: '/v1/admin/heads',
    operationId: 'getHeads',
    summary: 'Current heads of conversations',
    body: HeadsQueryBody,
    replies: [{ status: 200, description: 'The head of each conversation that exists.', schema: AdminHeadsReplySchema }],
    write: false,
  },
  {
    ...OPERATOR,
    method: 'post',
    path: '/v1/admin/import',
    operationId: 'importBatch',
    summary: 'Import a batch of conversation and user lines',
    description:
      'Idempotent backfill (max-merges): each conversation is created with its members and its head raised to `maxSeq`; each user line sets the read position and flags. `dryRun` writes nothing.',
    body: ImportBody,
    replies: [{ status: 200, description: 'What was imported (or, dry, would be).', schema: ImportReplySchema }],
  },
];

const CHANGE: Reply = { status: 200, description: "The user's stream position after the operation, and the conversation's state.", schema: ChangeReplySchema };
const EITHER: readonly Credential[] = ['apiKey', 'userToken'];

export const ENDPOINTS: readonly Endpoint[] = [
  {
    method: 'post',
    path: '/v1/messages',
    operationId: 'postMessages',
    tag: 'message service',
    summary: 'Report messages',
    description:
      'One message or `{messages: [...]}`. Applied once the reply is sent; idempotent and order-insensitive. If any conversation does not exist, nothing is applied.',
    auth: ['apiKey'],
    body: MessagesBody,
    replies: [{ status: 200, description: 'The messages are applied in the store.', schema: MessagesReplySchema }],
    errors: ['unknown_conversation', 'seq_jump'],
  },
  {
    method: 'put',
    path: '/v1/conversations/:conv/members',
    operationId: 'changeMembers',
    tag: 'message service',
    summary: 'Create a conversation, add/remove members, set its category',
    auth: ['apiKey'],
    body: MembersBody,
    replies: [{ status: 200, description: 'The member count after the change, and whether the conversation is read-diffused.', schema: MembersReplySchema }],
    errors: ['conversation_limit'],
  },
  {
    method: 'post',
    path: '/v1/users/:uid/read',
    operationId: 'markRead',
    tag: 'client',
    summary: 'Mark read up to a seq',
    description:
      'Raises the user\'s readSeq (never lowers it); drops the mentions at or below it and clears markedUnread. With `gen` (the `readGen` the client showed when the user read; 0 when it had none): a read made before an "unread from here" it had not seen is ignored (PROTOCOL.md "Unread from here").',
    auth: EITHER,
    body: ReadBody,
    replies: [CHANGE],
    errors: ['not_a_member', 'unknown_conversation'],
  },
  {
    method: 'post',
    path: '/v1/users/:uid/conversations/:conv/unread-from',
    operationId: 'markUnreadFrom',
    tag: 'client',
    summary: 'Mark unread from a message on',
    description:
      '"Unread from here": readSeq becomes `seq − 1` (never below where the conversation was deleted nor below the head when the user joined), under a new read generation `gen` (send the `readGen` you show plus one; absent: the server\'s plus one), on every device. Reads made before it (an older `gen`) are ignored whatever order they arrive in; a retry with the same `gen` changes nothing. Mentions above the new readSeq count again (those the server still keeps: PROTOCOL.md). Clears markedUnread. A `seq` above the conversation\'s head is refused.',
    auth: EITHER,
    body: UnreadFromBody,
    replies: [CHANGE],
    errors: ['not_a_member', 'unknown_conversation'],
  },
  {
    method: 'put',
    path: '/v1/users/:uid/conversations/:conv',
    operationId: 'updateConversationSettings',
    tag: 'client',
    summary: 'Mute / mark unread',
    auth: EITHER,
    body: SettingsBody,
    replies: [CHANGE],
    errors: ['not_a_member', 'unknown_conversation'],
  },
  {
    method: 'delete',
    path: '/v1/users/:uid/conversations/:conv',
    operationId: 'deleteConversation',
    tag: 'client',
    summary: 'Delete (hide) a conversation until a newer message arrives',
    auth: EITHER,
    replies: [CHANGE],
    errors: ['not_a_member', 'unknown_conversation'],
  },
  {
    method: 'put',
    path: '/v1/users/:uid/conversations/:conv/threads/:root',
    operationId: 'followThread',
    tag: 'client',
    summary: 'Follow a thread',
    description:
      "The user follows the thread of the conversation's message `root` (PROTOCOL.md \"Threads\"): their row `<conv>#r:<root>` appears, at the thread's head now, level `mentions` until they set another. Idempotent. `:conv` is a conversation id (not a topic's). Refused with `not_a_member` when the user is not in the conversation and with `limit_exceeded` beyond LIMITS.threadsFollowedPerConversation (200) threads of the conversation.",
    auth: EITHER,
    replies: [{ status: 200, description: 'The thread and whether this call made the user follow it.', schema: FollowReplySchema }],
    errors: ['invalid_request', 'not_a_member', 'unknown_conversation', 'limit_exceeded'],
  },
  {
    method: 'delete',
    path: '/v1/users/:uid/conversations/:conv/threads/:root',
    operationId: 'unfollowThread',
    tag: 'client',
    summary: 'Unfollow a thread',
    description:
      'The user stops following the thread: their row of it goes (a `state: null` entry). Idempotent: a thread not followed, or unknown, changes nothing.',
    auth: EITHER,
    replies: [{ status: 200, description: 'The thread, and whether this call ended a follow.', schema: FollowReplySchema }],
    errors: ['invalid_request'],
  },
  {
    method: 'get',
    path: '/v1/users/:uid/unread',
    operationId: 'getUnread',
    tag: 'client',
    summary: 'Unread summary (badge numbers)',
    description: 'A user Redpoint has never seen gets an empty summary, not an error.',
    auth: EITHER,
    replies: [{ status: 200, description: 'Totals over the visible, unmuted conversations, and every visible conversation.', schema: UnreadSummarySchema }],
  },
  {
    method: 'get',
    path: '/v1/sync',
    operationId: 'sync',
    tag: 'client',
    summary: "Pull the user's sync stream",
    description: "The user is the token's `sub`. Send the cursor back as `since=<epoch>:<version>`; `more: true` means pull again.",
    auth: ['userToken'],
    query: SyncQuery,
    replies: [{ status: 200, description: "A page of the user's stream.", schema: PullReplySchema }],
  },
  // Read receipts (issue 44).
  {
    method: 'get',
    path: '/v1/users/:uid/settings',
    operationId: 'getUserSettings',
    tag: 'client',
    summary: "The user's own settings (sharing read positions, mentions in muted conversations)",
    auth: EITHER,
    replies: [{ status: 200, description: 'The settings.', schema: UserSettingsReplySchema }],
  },
  {
    method: 'put',
    path: '/v1/users/:uid/settings',
    operationId: 'updateUserSettings',
    tag: 'client',
    summary: 'Share read positions or not; count mentions in muted conversations or not',
    description:
      "Either field or both. `shareReads: false`: the user's read positions are dropped from every conversation and no longer recorded, and the user sees no one else's (PROTOCOL.md, Read receipts). `true` again records each conversation's current readSeq. `mutedMentions: true`: each unread mention in a muted conversation counts in the badge (PROTOCOL.md, Notification levels); the user's stream starts over from a snapshot, so every device pulls and computes the same totals.",
    auth: EITHER,
    body: UserSettingsBody,
    replies: [{ status: 200, description: 'The settings after the change.', schema: UserSettingsReplySchema }],
  },
  {
    method: 'get',
    path: '/v1/users/:uid/conversations/:conv/reads',
    operationId: 'getReadReceipts',
    tag: 'client',
    summary: 'How many members have read each of some messages (and who, in small groups)',
    description: 'Ask `seqs=3,4,5` or `latest=N`. The asker is never counted; a sender is counted like any member (their own message raised their position).',
    auth: EITHER,
    query: ReadsQuery,
    replies: [{ status: 200, description: 'Per seq, the count of other members who read it.', schema: ReadReceiptsReplySchema }],
    errors: ['forbidden', 'not_a_member', 'unknown_conversation'],
  },
  ...OPERATOR_ENDPOINTS,
  {
    method: 'get',
    path: '/healthz',
    operationId: 'healthz',
    tag: 'operations',
    summary: 'Liveness',
    description: ON_OPS_PORT,
    auth: [],
    replies: [{ status: 200, description: 'The process serves requests.', schema: HealthReplySchema }],
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/readyz',
    operationId: 'readyz',
    tag: 'operations',
    summary: 'Readiness: does the store answer?',
    description: ON_OPS_PORT,
    auth: [],
    replies: [
      { status: 200, description: 'The store answers.', schema: ReadyReplySchema },
      { status: 503, description: 'The store does not answer (`ready: false`).', schema: ReadyReplySchema },
    ],
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/metrics',
    operationId: 'metrics',
    tag: 'operations',
    summary: 'Prometheus metrics',
    description: ON_OPS_PORT,
    auth: [],
    replies: [{ status: 200, description: 'Prometheus text exposition (always text).', mediaType: 'text/plain' }],
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'openapi',
    tag: 'operations',
    summary: 'This document',
    description: 'Served on PORT only: the OPS_PORT listener answers `404 not_found`.',
    auth: [],
    replies: [{ status: 200, description: 'The OpenAPI 3.1 document of this API.', schema: OpenApiReplySchema }],
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/dev/token',
    operationId: 'devToken',
    tag: 'dev mode',
    summary: 'Mint a user token with the published dev secret',
    description: 'Dev mode only: no credential needed, so the demo page can sign in as anyone.',
    auth: [],
    body: DevTokenBody,
    replies: [{ status: 200, description: 'A 24 h user JWT.', schema: DevTokenReplySchema }],
    devModeOnly: true,
  },
  {
    method: 'get',
    path: '/demo/activity',
    operationId: 'demoActivity',
    tag: 'dev mode',
    summary: "The demo page's chat-list order and the test tools' messages: when each conversation was last active",
    description:
      "Served by the dev entry in dev mode only. Redpoint keeps counts, not message times; the demo's devices share this record so that every device lists conversations in one order (by last activity, then id).",
    auth: [],
    replies: [{ status: 200, description: 'Every conversation some device reported.', schema: DemoActivityReplySchema }],
    devModeOnly: true,
  },
  {
    method: 'post',
    path: '/demo/activity',
    operationId: 'reportDemoActivity',
    tag: 'dev mode',
    summary: "A device of the demo saw a conversation's newest message",
    description:
      "Dev entry, dev mode only. The first report of a higher seq stamps the conversation with the time now; later ones change nothing. `messages` are what the demo's test tools sent (Redpoint keeps no text): each is kept (the last 20 per conversation) and a sent message's own time (`agoMs` before now) stamps its seq, whichever report came first.",
    auth: [],
    body: DemoActivityBody,
    replies: [{ status: 200, description: 'The record after the report.', schema: DemoActivityReplySchema }],
    devModeOnly: true,
  },
  {
    method: 'post',
    path: '/demo/badge-hook',
    operationId: 'receiveDemoBadgeEvent',
    tag: 'dev mode',
    summary: "The badge hook's receiver in the dev entry: a push service in miniature",
    description:
      'Dev entry, dev mode only: `npm start` with no hook configured points the badge hook here (docs/badge-hook.md, "Trying it: the demo"). The request is checked as PROTOCOL.md "Badge hook" says (HMAC-SHA256 over `<Redpoint-Timestamp>.<raw body>` with the dev secret, the timestamp within 300 s): a forged or replayed one is refused with 401. An event is kept only when its seq is above the last one kept for its user.',
    auth: [],
    body: DemoBadgeEventBodySchema,
    replies: [{ status: 200, description: 'Accepted (kept or already known).', schema: DemoBadgeHookReplySchema }],
    errors: ['unauthorized'],
    devModeOnly: true,
  },
  {
    method: 'get',
    path: '/demo/badge-events',
    operationId: 'demoBadgeEvents',
    tag: 'dev mode',
    summary: 'The last badge events the demo receiver got for a user',
    description: 'Dev entry, dev mode only: what the demo page\'s "push service" line shows.',
    auth: [],
    query: DemoBadgeEventsQuery,
    replies: [{ status: 200, description: "The user's last events.", schema: DemoBadgeEventsReplySchema }],
    devModeOnly: true,
  },
  ...(
    [
      ['/', 'demoPage', 'The demo page', 'text/html'],
      ['/demo/app.js', 'demoScript', "The demo page's script (bundled on each load of `/`)", 'text/javascript'],
      ['/demo/app.css', 'demoStyles', "The demo page's styles", 'text/css'],
    ] as const
  ).map(
    ([path, operationId, summary, mediaType]): Endpoint => ({
      method: 'get',
      path,
      operationId,
      tag: 'dev mode',
      summary,
      description: 'Served by the dev entry (`npm start`, from a checkout) in dev mode only; the production entry answers 404.',
      auth: [],
      replies: [
        { status: 200, description: summary, mediaType },
        { status: 500, description: 'The bundle could not be built (esbuild missing).', mediaType: 'text/plain' },
      ],
      devModeOnly: true,
    }),
  ),
];

/** The path parameters of an endpoint, in order (`/v1/users/:uid/conversations/:conv` → uid, conv). */
export function pathParameters(path: string): string[] {
  return [...path.matchAll(/\/:([A-Za-z]+)/g)].map((m) => m[1] ?? '');
}

/**
 * Every error code an endpoint may answer: those that follow from its shape, then its own.
 * During graceful shutdown every endpoint answers `503 unavailable`, and any may fail `internal`.
 * A write to the store may also answer `503 outcome_unknown` (the store took it but did not confirm).
 */
export function errorCodesOf(endpoint: Endpoint): ErrorCode[] {
  // Any request may carry ambiguous framing headers; it is refused before its route runs.
  const codes = new Set<ErrorCode>(['bad_framing']);
  if (pathParameters(endpoint.path).length > 0 || endpoint.query) codes.add('invalid_request');
  if (endpoint.body) for (const code of ['bad_json', 'invalid_request', 'payload_too_large', 'unsupported_media_type'] as const) codes.add(code);
  if (endpoint.auth.length > 0) codes.add('unauthorized');
  if (endpoint.auth.includes('userToken')) codes.add('token_expired');
  // Client requests are rate limited and charged to the user's cost budget (429 with Retry-After).
  if (endpoint.auth.includes('userToken')) codes.add('rate_limited');
  // A user's token acting for another user (`:uid` paths that also take the API key).
  if (endpoint.auth.includes('userToken') && pathParameters(endpoint.path).includes('uid')) codes.add('forbidden');
  for (const code of endpoint.errors ?? []) codes.add(code);
  // A server that is not in dev mode does not route them: the catch-all's 404.
  if (endpoint.devModeOnly) codes.add('not_found');
  codes.add('internal');
  codes.add('unavailable');
  if (endpoint.method !== 'get' && endpoint.write !== false && endpoint.tag !== 'operations' && !endpoint.devModeOnly) codes.add('outcome_unknown');
  // In the order of ERROR_CODES, so that equal sets read (and are named) the same everywhere.
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => codes.has(code));
}
