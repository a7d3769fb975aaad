import { type Static, Type } from '@sinclair/typebox';
import { AUTH_CHECKS, type AuthCheck, ERROR_CODES, type ErrorCode } from './errors.js';
import { LIMITS } from './limits.js';
import { Category, ConvRef, DemoMessageKind, Id } from './schemas.js';

/**
 * Schemas of every reply the HTTP API sends: the single source of the reply types in `types.ts`
 * and of `ErrorBody` (derived with `Static<>`) and of the OpenAPI document (`npm run openapi`).
 * A schema with an `$id` becomes a named component of that document; the `$id` never leaves it.
 * `additionalProperties: false` everywhere: the document states exactly what v1 sends, and the
 * contract test fails when the server sends a field the document does not name.
 */

export const Version = Type.Integer({ minimum: 0, description: "A position in the user's sync stream." });
const SeqValue = Type.Integer({ minimum: 0 });
export const Epoch = Type.String({ minLength: 1, maxLength: 32, description: "Opaque id of the user's stream history." });

/** Issue 43: only 'mentions' is sent; the other levels are `muted` ('none') and its absence ('all'), as before levels. */
const LevelSchema = Type.Literal('mentions', {
  description:
    "The notification level 'mentions': listed with its unread, only its @-mentions count in the totals. Absent: the level follows `muted` ('none' when muted, else 'all').",
});
const AtSchema = Type.Integer({
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
  description: "Last activity: the largest message-service timestamp (`at`, ms since the Unix epoch) of this conversation's messages. Absent: unknown.",
});

export const ConvStateSchema = Type.Object(
  {
    conv: ConvRef,
    // Topics (PROTOCOL.md "Topics"): a topic's row names its conversation and topic, so a client groups rows without parsing `conv`.
    parent: Type.Optional(Id),
    topic: Type.Optional(Type.String({ description: "A topic's row: the topic's id (`conv` is then `<parent>#t:<topic>`)." })),
    thread: Type.Optional(
      Type.Integer({ minimum: 1, description: "A thread's row: the root message's seq in `parent` (`conv` is then `<parent>#r:<thread>`)." }),
    ),
    lastSeq: Type.Integer({
      minimum: 0,
      description: 'Highest seq delivered to this user. For a read-diffused (`large`) conversation only a lower bound: `heads` is authoritative.',
    }),
    readSeq: Type.Integer({
      minimum: 0,
      description: 'Highest seq this user has read on any device. Raised by reads; set back only by the user\'s "unread from here" (a new `readGen`).',
    }),
    readGen: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: Number.MAX_SAFE_INTEGER,
        description:
          'The read position\'s generation, raised by each "unread from here" (absent: 0, never marked). A read sent with the generation it was made in is ignored once a newer one is in (PROTOCOL.md "Unread from here").',
      }),
    ),
    mentions: Type.Integer({ minimum: 0, description: 'Distinct seqs above `readSeq` that @-mention this user.' }),
    muted: Type.Boolean({ description: "The notification level is 'none' (kept for clients that know no `level`)." }),
    markedUnread: Type.Boolean(),
    category: Category,
    large: Type.Boolean({ description: 'Read diffusion: the effective lastSeq comes from the conversation head.' }),
    // Issue 43: notification level and last activity, sent only when not the default.
    level: Type.Optional(LevelSchema),
    at: Type.Optional(AtSchema),
    // Issue 43, "What counts": sent only when above 0.
    nocount: Type.Optional(
      Type.Integer({
        minimum: 1,
        description: 'Seqs in (readSeq, lastSeq] that do not count (non-counting messages, recalls): unread = lastSeq − readSeq − nocount.',
      }),
    ),
    deletedSeq: Type.Integer({
      minimum: -1,
      description: 'Hidden while the effective lastSeq is <= deletedSeq; reappears with the next message. -1: never deleted.',
    }),
  },
  {
    $id: 'ConvState',
    additionalProperties: false,
    description: "A user's state of one conversation; every field absolute, not a delta, so applying it twice is harmless.",
  },
);

export const ConvEntrySchema = Type.Object(
  {
    v: Version,
    conv: ConvRef,
    state: Type.Union([ConvStateSchema, Type.Null()], { description: '`null`: the user left the conversation; drop it.' }),
  },
  { $id: 'ConvEntry', additionalProperties: false, description: "One change in a user's sync stream: the conversation's whole state after it." },
);

export const SnapshotSchema = Type.Object(
  { v: Version, convs: Type.Array(ConvStateSchema) },
  { $id: 'Snapshot', additionalProperties: false, description: "All of a user's conversations as of version `v`." },
);

export const PullReplySchema = Type.Object(
  {
    epoch: Epoch,
    snapshot: Type.Optional(SnapshotSchema),
    entries: Type.Array(ConvEntrySchema, { description: 'Changes after the cursor (or after the snapshot), in version order.' }),
    version: Type.Integer({ minimum: 0, description: 'The cursor version once this reply is applied.' }),
    more: Type.Boolean({ description: 'More entries follow: pull again with `since=<epoch>:<version>`.' }),
    heads: Type.Record(Id, SeqValue, { description: 'Current head (maxSeq) of each read-diffused conversation the user is in.' }),
    mutedMentions: Type.Optional(
      Type.Literal(true, {
        description:
          'The user\'s setting `mutedMentions` is on: a muted conversation adds its unread mentions to the totals as a level-`mentions` one does (PROTOCOL.md "Notification levels"). Read in the same step as the stream, not part of it: each reply you apply replaces your setting (absent: off); a change moves the version.',
      }),
    ),
    peerReads: Type.Optional(
      Type.Record(Id, SeqValue, {
        description:
          "Read receipts: the peer's read position in each one-to-one conversation of this reply (all of them with a snapshot), read now, not part of the stream. Absent when none is known or the user does not share reads.",
      }),
    ),
    // Issue 43: what a read-diffused conversation keeps beside its head, for those that have it.
    headAt: Type.Optional(
      Type.Record(Id, AtSchema, {
        description: "Last activity (`at`, ms) of each read-diffused conversation that has one: the conversation's is max(state.at, headAt[conv]).",
      }),
    ),
    mentionAll: Type.Optional(
      Type.Record(Id, Type.Array(Type.Integer({ minimum: 1 }), { maxItems: LIMITS.mentionSeqsPerConversation }), {
        description:
          'The @all seqs (ascending, the newest LIMITS.mentionSeqsPerConversation) of each read-diffused conversation that has any: each seq s with readSeq < s <= the effective lastSeq is one more mention of this user.',
      }),
    ),
    nocount: Type.Optional(
      Type.Record(Id, Type.Array(Type.Integer({ minimum: 1 }), { maxItems: LIMITS.nocountSeqsPerConversation }), {
        description:
          'The non-counting seqs (`counts: false` messages and recalled seqs; ascending, the newest LIMITS.nocountSeqsPerConversation) of each read-diffused conversation that has any: unread = (lastSeq - readSeq) - max(state.nocount, the count of these in (readSeq, lastSeq]), and an @all seq among them is no mention.',
      }),
    ),
  },
  {
    $id: 'PullReply',
    additionalProperties: false,
    description: "A page of the user's stream. With `snapshot`: replace ALL local state with it, then apply `entries`.",
  },
);

export const ConvViewSchema = Type.Object(
  {
    conv: ConvRef,
    // Topics (PROTOCOL.md "Topics"): a topic's row names its conversation and topic, so a client groups rows without parsing `conv`.
    parent: Type.Optional(Id),
    topic: Type.Optional(Type.String({ description: "A topic's row: the topic's id (`conv` is then `<parent>#t:<topic>`)." })),
    thread: Type.Optional(
      Type.Integer({ minimum: 1, description: "A thread's row: the root message's seq in `parent` (`conv` is then `<parent>#r:<thread>`)." }),
    ),
    lastSeq: Type.Integer({ minimum: 0, description: 'The effective lastSeq (heads applied).' }),
    readSeq: Type.Integer({ minimum: 0 }),
    unread: Type.Integer({ minimum: 0 }),
    mentions: Type.Integer({ minimum: 0 }),
    muted: Type.Boolean(),
    markedUnread: Type.Boolean(),
    category: Category,
    peerReadSeq: Type.Optional(
      Type.Integer({ minimum: 0, description: "Read receipts: a one-to-one conversation's peer's read position, when known and both share reads." }),
    ),
    level: Type.Optional(LevelSchema),
    at: Type.Optional(AtSchema),
    threads: Type.Optional(
      Type.Object(
        { unread: Type.Integer({ minimum: 0 }), mentions: Type.Integer({ minimum: 0 }) },
        {
          additionalProperties: false,
          description:
            "A conversation's row: the sums over the user's followed, unmuted thread rows of it, present when either is above 0 (PROTOCOL.md \"Threads\"). A display figure: the totals count each thread's row on its own.",
        },
      ),
    ),
  },
  { $id: 'ConvView', additionalProperties: false, description: 'A conversation as a UI shows it: effective lastSeq, unread derived.' },
);

export const UnreadSummarySchema = Type.Object(
  {
    uid: Id,
    epoch: Epoch,
    version: Version,
    total: Type.Integer({ minimum: 0, description: 'Sum of `unread` over the visible conversations that are not muted.' }),
    mentions: Type.Integer({ minimum: 0, description: 'Sum of `mentions` over the same conversations.' }),
    categories: Type.Record(Category, Type.Integer({ minimum: 0 }), {
      description: '`total`, split by category. Categories with zero unread may be omitted.',
    }),
    conversations: Type.Array(ConvViewSchema, { description: 'The visible conversations (deleted ones are left out).' }),
    mutedMentions: Type.Optional(
      Type.Literal(true, {
        description:
          'The user\'s setting `mutedMentions` is on: a muted conversation adds its unread mentions to the totals as a level-`mentions` one does (PROTOCOL.md "Notification levels"). Absent: off.',
      }),
    ),
  },
  { $id: 'UnreadSummary', additionalProperties: false },
);

export const ChangeReplySchema = Type.Object(
  {
    changed: Type.Boolean({ description: 'False: nothing changed (duplicate, older seq, same flag); the version did not move.' }),
    epoch: Epoch,
    version: Type.Integer({ minimum: 0, description: "The user's version after the operation." }),
    state: ConvStateSchema,
  },
  { $id: 'ChangeReply', additionalProperties: false, description: 'The reply of the per-user write endpoints (read, settings, delete).' },
);

export const FollowReplySchema = Type.Object(
  {
    conv: ConvRef,
    following: Type.Boolean({ description: 'Whether the user follows the thread now.' }),
    changed: Type.Boolean({ description: 'False: the user followed (or did not follow) the thread already.' }),
  },
  {
    $id: 'FollowReply',
    additionalProperties: false,
    description: "A thread follow's or unfollow's reply: the thread's id (`<conv>#r:<root>`, its row's `conv`).",
  },
);

// --- Read receipts (issue 44) ---

export const UserSettingsReplySchema = Type.Object(
  {
    uid: Id,
    shareReads: Type.Boolean({ description: 'Whether the user shares read positions (default true).' }),
    mutedMentions: Type.Boolean({ description: 'Whether mentions in muted conversations count in the badge (default false).' }),
  },
  { $id: 'UserSettingsReply', additionalProperties: false },
);

export const ReadReceiptsReplySchema = Type.Object(
  {
    conv: ConvRef,
    members: Type.Integer({ minimum: 0, description: 'Member count.' }),
    large: Type.Boolean({ description: 'Read-diffused: counts only, no `readers`.' }),
    seqs: Type.Array(
      Type.Object(
        {
          seq: SeqValue,
          count: Type.Integer({ minimum: 0, description: 'Members other than the asker who have read this seq (and share reads).' }),
          readers: Type.Optional(
            Type.Array(Id, {
              description: 'Who they are, sorted; only in conversations of at most RECEIPTS_DETAIL_MEMBERS members that are not read-diffused.',
            }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { $id: 'ReadReceiptsReply', additionalProperties: false, description: 'For each asked seq, how many other members have read it.' },
);

// --- end read receipts ---

export const MessagesReplySchema = Type.Object(
  { ok: Type.Literal(true), accepted: Type.Integer({ minimum: 1, description: 'Messages applied.' }) },
  { $id: 'MessagesReply', additionalProperties: false },
);

export const MembersReplySchema = Type.Object(
  {
    conv: Id,
    members: Type.Integer({ minimum: 0, description: 'Member count after the change.' }),
    large: Type.Boolean({ description: 'The conversation is read-diffused (more members than LARGE_GROUP_THRESHOLD).' }),
  },
  { $id: 'MembersReply', additionalProperties: false },
);

export const HealthReplySchema = Type.Object({ ok: Type.Literal(true) }, { $id: 'HealthReply', additionalProperties: false });

export const ReadyReplySchema = Type.Object(
  { ready: Type.Boolean(), engine: Type.Union([Type.Literal('memory'), Type.Literal('redis')]) },
  { $id: 'ReadyReply', additionalProperties: false },
);

export const DevTokenReplySchema = Type.Object(
  { uid: Id, token: Type.String({ minLength: 1, description: 'A 24 h user JWT signed with the published dev secret.' }) },
  { $id: 'DevTokenReply', additionalProperties: false },
);

export const DemoActivityReplySchema = Type.Object(
  {
    activity: Type.Record(Type.String(), Type.Integer({ minimum: 0 }), {
      description:
        "Conversation id → when its newest message was sent (the test tools' own time) or a device of the demo first saw it (ms since the Unix epoch).",
    }),
    messages: Type.Record(
      Type.String(),
      Type.Array(
        Type.Object(
          {
            seq: SeqValue,
            sender: Type.String(),
            text: Type.String(),
            mention: Type.Boolean(),
            at: Type.Integer({ minimum: 0 }),
            kind: Type.Optional(DemoMessageKind),
            recalls: Type.Optional(SeqValue),
          },
          { additionalProperties: false },
        ),
      ),
      { description: "Conversation id → the last messages the demo's test tools sent to it, oldest first." },
    ),
  },
  { $id: 'DemoActivityReply', additionalProperties: false },
);

/** The demo's shared record (dev entry only), and one message of it. */
export type DemoActivityReply = Static<typeof DemoActivityReplySchema>;
export type DemoKeptMessage = DemoActivityReply['messages'][string][number];

/** The demo's badge hook receiver (dev entry only, client-demo/badge-receiver.ts); the event's own schema is server/hook/badge-event.ts's, which the receiver checks. */
export const DemoBadgeEventBodySchema = Type.Object(
  { type: Type.Literal('badge'), uid: Id, seq: Type.Integer({ minimum: 1 }) },
  { $id: 'DemoBadgeEvent', additionalProperties: true, description: 'A badge event as the hook sends it (PROTOCOL.md "Badge hook").' },
);
export const DemoBadgeEventsQuery = Type.Object({ uid: Id }, { additionalProperties: false });
export const DemoBadgeHookReplySchema = Type.Object(
  { kept: Type.Boolean({ description: "false: the event's seq was not above the user's last kept one (a retry or an older event), so nothing changed." }) },
  { $id: 'DemoBadgeHookReply', additionalProperties: false },
);

export const DemoBadgeEventsReplySchema = Type.Object(
  {
    events: Type.Array(
      Type.Object(
        {
          event: Type.Object({}, { additionalProperties: true, description: 'The badge event as the hook sent it (PROTOCOL.md "Badge hook").' }),
          receivedAt: Type.Integer({ minimum: 0, description: 'When the receiver accepted it, ms since the Unix epoch.' }),
        },
        { additionalProperties: false },
      ),
      { description: "The user's last badge events (up to 5), oldest first." },
    ),
  },
  { $id: 'DemoBadgeEventsReply', additionalProperties: false },
);

/** `/openapi.json` is the document itself; its own schema is the OpenAPI 3.1 specification. */
export const OpenApiReplySchema = Type.Object(
  { openapi: Type.Literal('3.1.0'), info: Type.Object({}), paths: Type.Object({}) },
  { $id: 'OpenApiDocument', description: 'An OpenAPI 3.1 document.' },
);

const ERROR_CODE_LIST = Object.keys(ERROR_CODES) as ErrorCode[];

/** A string enum rather than a union of literals: one `enum` line in the document per code set. */
export function errorCodeSchema(codes: readonly ErrorCode[] = ERROR_CODE_LIST) {
  return Type.Unsafe<ErrorCode>(Type.String({ enum: [...codes] }));
}

export const ErrorBodySchema = Type.Object(
  {
    error: Type.Object(
      {
        code: errorCodeSchema(),
        message: Type.String({ description: 'For people; may change. Validation errors start with the path of the offending field.' }),
        check: Type.Optional(
          Type.Unsafe<AuthCheck>(
            Type.String({
              enum: Object.keys(AUTH_CHECKS),
              description: 'With `unauthorized` and `token_expired`: which credential check failed (PROTOCOL.md, "Credential checks").',
            }),
          ),
        ),
      },
      { additionalProperties: false },
    ),
  },
  { $id: 'Error', additionalProperties: false, description: 'Every error reply. Branch on `code`, the stable contract.' },
);

/** The body of every error reply. */
export type ErrorBody = Static<typeof ErrorBodySchema>;
