import { type Static, Type } from '@sinclair/typebox';
import { Head, ReconcileCursor } from './admin-schemas.js';
import { Epoch, Version } from './replies.js';
import { Category, ConvRef, Id } from './schemas.js';

/**
 * Schemas of the operator endpoints' replies (PROTOCOL.md "Operator endpoints"): the single
 * source of the toolbox's reply types (server/admin/, derived with `Static<>`) and of their part
 * of the OpenAPI document. Conventions as in `replies.ts`: an `$id` names a component,
 * `additionalProperties: false` everywhere. Fields read back from the store as it is ("stored")
 * carry no range: showing a broken store as it is, is what an inspection is for.
 */

const Count = Type.Integer({ minimum: 0 });
const Generation = Type.Integer({ minimum: 0, description: 'A membership generation.' });
const Ttl = Type.Integer({ minimum: -2, description: 'Seconds left without changes; -1: no expiry, -2: absent.' });
const Mode = Type.Union([Type.Literal('write'), Type.Literal('read')], { description: 'Diffusion mode: `read` for a large (read-diffused) conversation.' });

/** What a reconcile finds, one line of reason each (what `redpoint reconcile` prints per kind). */
export const FINDING_KINDS = {
  totals: 'stored totals or categories differ from the sum over the records',
  'member-count': 'stored member count differs from the member records',
  'large-index': 'index of read-diffused conversations differs from the member records',
  stream: "the stream's newest entry is not the version (or base/snapshot positions are out of order)",
  snapshot: 'the newest snapshot and the entries after it do not replay to the records',
  'missing-join': 'the conversation lists the user, but its record is not that membership',
  'stale-member': 'a member record whose conversation does not list the user (or does not exist)',
  'stale-mode': "a member record whose mode or category is not its conversation's (no rewrite pending)",
  'behind-head': "a member of a write-diffused conversation whose lastSeq is below the conversation's head",
  'generation-ahead': "a record newer than its conversation's generation (the conversation lost writes)",
  'conv-member-count': "a conversation's stored member count differs from its members",
  'unfinished-rewrite': 'a conversation still mid-rewrite after the grace period',
  'unfinished-delete': 'a conversation deletion begun and not finished after the grace period',
} as const;

export type FindingKind = keyof typeof FINDING_KINDS;

const FindingSchema = Type.Object(
  {
    // A string enum, as for error codes: one `enum` line in the document.
    kind: Type.Unsafe<FindingKind>(Type.String({ enum: Object.keys(FINDING_KINDS) })),
    uid: Type.Optional(Id),
    conv: Type.Optional(Id),
    detail: Type.String({ description: 'For people; may change.' }),
  },
  { $id: 'Finding', additionalProperties: false, description: 'A broken invariant of the store, about a user, a conversation, or a user in one.' },
);
export type Finding = Static<typeof FindingSchema>;

export const ReconcilePageSchema = Type.Object(
  {
    cursor: ReconcileCursor,
    users: Type.Integer({ minimum: 0, description: 'Users checked.' }),
    conversations: Type.Integer({ minimum: 0, description: 'Conversations checked.' }),
    midRewrite: Type.Integer({ minimum: 0, description: 'Conversations seen mid-rewrite whose rewrite finished within the grace period (not findings).' }),
    findings: Type.Array(FindingSchema, { description: 'Findings still there after the grace period.' }),
    repaired: Type.Array(FindingSchema, { description: 'Of those, the ones gone after the repair.' }),
    unrepaired: Type.Array(FindingSchema, { description: 'Of those, the ones a repair did not fix (every finding, without `repair`).' }),
  },
  { $id: 'ReconcilePage', additionalProperties: false, description: 'What one page of a reconcile walk (or one list of ids) found and did.' },
);
export type ReconcilePage = Static<typeof ReconcilePageSchema>;

export const CountReplySchema = Type.Object(
  { count: Type.Integer({ minimum: 0, description: 'Users or conversations a walk meets now.' }) },
  { $id: 'CountReply', additionalProperties: false },
);

const ConversationLineSchema = Type.Object(
  {
    conv: ConvRef,
    status: Type.Union([Type.Literal('member'), Type.Literal('left'), Type.Literal('pending')], {
      description: '`left`: a tombstone, or the record of a deleted conversation; `pending`: a message arrived before the join.',
    }),
    lastSeq: Type.Integer({ description: 'The effective lastSeq: for a read-diffused conversation, its head.' }),
    storedLastSeq: Type.Integer(),
    readSeq: Type.Integer(),
    unread: Count,
    mentions: Count,
    muted: Type.Boolean(),
    markedUnread: Type.Boolean(),
    hidden: Type.Boolean({ description: 'Deleted by the user and no newer message: not shown, not counted.' }),
    deletedSeq: Type.Integer(),
    category: Category,
    mode: Mode,
    gen: Type.Integer(),
    joinGen: Type.Integer(),
  },
  { $id: 'ConversationLine', additionalProperties: false, description: 'One record of a user, as stored and as shown.' },
);
export type ConversationLine = Static<typeof ConversationLineSchema>;

const ShownTotals = Type.Object(
  { total: Count, mentions: Count, categories: Type.Record(Category, Count) },
  { additionalProperties: false, description: 'The badge numbers as `/unread` computes them: stored totals plus read-diffused conversations now.' },
);

const StoredTotals = Type.Object(
  { total: Type.Integer(), mentions: Type.Integer(), categories: Type.Record(Category, Type.Integer()) },
  { additionalProperties: false, description: 'What the store keeps for write-diffused conversations (must equal their sum).' },
);

export const UserInspectionSchema = Type.Object(
  {
    uid: Id,
    seen: Type.Boolean({ description: 'False: the store holds no stream for this user (never seen, only pending records, or erased).' }),
    epoch: Epoch,
    version: Version,
    epochRotates: Type.Boolean({ description: "The epoch rotates at the user's next step (the Redis server holding it restarted since)." }),
    stream: Type.Object(
      {
        base: Type.Integer({ description: 'Entries with v <= base are trimmed.' }),
        length: Count,
        ttlSeconds: Ttl,
        interval: Type.Integer({ minimum: 1, description: "The user's snapshot interval now." }),
      },
      { additionalProperties: false },
    ),
    snapshot: Type.Object(
      { version: Type.Integer(), present: Type.Boolean(), conversations: Count, ttlSeconds: Ttl },
      { additionalProperties: false, description: 'The newest snapshot; `present: false` when it expired (or is missing).' },
    ),
    totals: Type.Object({ shown: ShownTotals, stored: StoredTotals }, { additionalProperties: false }),
    conversations: Type.Array(ConversationLineSchema, { description: 'Every record of the user, by conversation id.' }),
    findings: Type.Array(FindingSchema, { description: 'The reconcile checks on this user, right now (no grace period: a finding may be a step in flight).' }),
  },
  { $id: 'UserInspection', additionalProperties: false, description: 'Everything support needs about one user, in one read of its state.' },
);
export type UserInspection = Static<typeof UserInspectionSchema>;

export const ConversationInspectionSchema = Type.Object(
  {
    conv: Id,
    deleting: Type.Boolean({ description: "A deletion begun and not finished (the roster is the deletion record's)." }),
    maxSeq: Type.Integer({ minimum: 0 }),
    memberCount: Count,
    storedMemberCount: Type.Integer({ description: 'The member count the conversation stores (compare with `memberCount`).' }),
    mode: Mode,
    category: Category,
    gen: Generation,
    rewrite: Type.Integer({ minimum: 0, description: 'Generation of an unfinished member rewrite (0: none).' }),
    members: Type.Array(Type.Object({ uid: Id, joinGen: Generation, joinHead: Type.Integer({ minimum: 0 }) }, { additionalProperties: false }), {
      description: 'The first members by id (at most 100).',
    }),
    moreMembers: Type.Integer({ minimum: 0, description: 'Members left out of `members`.' }),
  },
  { $id: 'ConversationInspection', additionalProperties: false },
);
export type ConversationInspection = Static<typeof ConversationInspectionSchema>;

export const UserTracesSchema = Type.Object(
  {
    state: Type.Boolean({ description: 'The store holds state of the user (records, meta, stream, snapshot, index).' }),
    listedIn: Type.Array(Id, { description: 'Conversations that list the user as a member.' }),
  },
  { $id: 'UserTraces', additionalProperties: false, description: 'What is left of a user: nothing (`false`, `[]`) after an erase.' },
);
export type UserTraces = Static<typeof UserTracesSchema>;

export const EraseReplySchema = Type.Object(
  {
    uid: Id,
    conversations: Type.Array(Id, { description: 'Conversations the user was removed from, sorted.' }),
    foundByScan: Type.Array(Id, { description: 'With `scan=1`: conversations found listing the user that its records did not name.' }),
  },
  { $id: 'EraseReply', additionalProperties: false },
);
export type EraseResult = Static<typeof EraseReplySchema>;

export const DeleteConversationReplySchema = Type.Object(
  {
    conv: Id,
    members: Type.Integer({ minimum: 0, description: 'Members the deletion removed (its whole roster, even those an earlier attempt removed).' }),
    gen: Generation,
  },
  { $id: 'DeleteConversationReply', additionalProperties: false },
);
export type DeleteResult = Static<typeof DeleteConversationReplySchema>;

export const RebaseReplySchema = Type.Object(
  {
    conv: Id,
    before: Type.Integer({ minimum: 0, description: 'The head before the rebase.' }),
    head: Type.Integer({ minimum: 0, description: 'The head after it: the lower of `before` and the seq asked for.' }),
    gen: Generation,
    members: Type.Integer({ minimum: 0, description: 'Members rebased (every member, each one with a new stream epoch).' }),
  },
  { $id: 'RebaseReply', additionalProperties: false },
);
export type RebaseResult = Static<typeof RebaseReplySchema>;

export const HeadsReplySchema = Type.Object(
  {
    heads: Type.Array(Head, { description: "Each known conversation's head after the call (at least what was asserted), sorted by conversation." }),
    unknown: Type.Array(Id, { description: 'Conversations that do not exist (nothing was created for them), sorted.' }),
  },
  { $id: 'HeadsReply', additionalProperties: false },
);
export type HeadsResult = Static<typeof HeadsReplySchema>;

export const AdminHeadsReplySchema = Type.Object(
  { heads: Type.Record(Id, Type.Integer({ minimum: 0 }), { description: 'The current head of each conversation asked for; missing ones left out.' }) },
  { $id: 'AdminHeadsReply', additionalProperties: false },
);

export const ImportReplySchema = Type.Object(
  {
    conversations: Type.Integer({ minimum: 0, description: 'Conversation lines imported.' }),
    pairs: Type.Integer({ minimum: 0, description: '(user, conversation) pairs written (with `dryRun`: that would be).' }),
    unknown: Type.Array(Type.Object({ uid: Id, conv: Id }, { additionalProperties: false }), {
      description: 'User lines naming a conversation that neither the batch nor the store has (skipped).',
    }),
  },
  { $id: 'ImportReply', additionalProperties: false },
);
export type ImportBatchResult = Static<typeof ImportReplySchema>;
