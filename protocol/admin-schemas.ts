import { type Static, Type } from '@sinclair/typebox';
import { LIMITS } from './limits.js';
import { Category, Id, ReadSeq, Seq } from './schemas.js';

/**
 * Request bodies and queries of the operator endpoints (PROTOCOL.md "Operator endpoints"), and
 * the lines of an import file (the CLI's `import` reads them, `POST /v1/admin/import` takes them).
 * Their replies are in `admin-replies.ts`.
 */

/** A conversation's head: asserted (`PUT /v1/heads`), and as it is after (the replies). */
export const Head = Type.Object({ conv: Id, maxSeq: Seq }, { $id: 'Head', additionalProperties: false });
export type HeadAssertion = Static<typeof Head>;

export const HeadBody = Type.Object({ maxSeq: Seq }, { additionalProperties: false });

export const HeadsBody = Type.Object({ heads: Type.Array(Head, { minItems: 1, maxItems: LIMITS.messagesPerBatch }) }, { additionalProperties: false });

/** `PUT /v1/users/:uid/conversations/:conv/read`: the read position to lower to (absent: the conversation's head now). */
export const ResetReadBody = Type.Object(
  { seq: Type.Optional({ ...ReadSeq, description: "The read position to lower to; absent: the conversation's head now." }) },
  { additionalProperties: false },
);

/** `POST /v1/admin/conversations/:conv/rebase`: the head to lower the conversation to. */
export const RebaseBody = Type.Object(
  { seq: { ...ReadSeq, description: "The conversation's new head (0: start over); a head at or below it is kept." } },
  { additionalProperties: false },
);

/** `DELETE /v1/users/:uid?scan=1`: also walk every conversation for the user. */
export const EraseQuery = Type.Object({
  scan: Type.Optional(
    Type.Union([Type.Literal('0'), Type.Literal('1')], { description: '`1`: also walk every conversation for the id (costly on a big store).' }),
  ),
});

/** Ids per reconcile request, and per walk page. */
const RECONCILE_IDS_MAX = 1000;

export const ReconcileCursor = Type.String({
  maxLength: 256,
  pattern: '^([uc]:[0-9A-Za-z_.:@-]*)?$',
  description: "Where a reconcile walk is: `u:<scan cursor>` (users), `c:<scan cursor>` (conversations). `''` starts a walk; in a reply, the walk is done.",
});

export const ReconcileBody = Type.Object(
  {
    cursor: Type.Optional(ReconcileCursor),
    users: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: RECONCILE_IDS_MAX })),
    conversations: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: RECONCILE_IDS_MAX })),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: RECONCILE_IDS_MAX })),
    repair: Type.Boolean(),
    graceMs: Type.Integer({ minimum: 0, maximum: 60_000 }),
  },
  { additionalProperties: false },
);
export type ReconcileRequest = Static<typeof ReconcileBody>;

export const HeadsQueryBody = Type.Object({ convs: Type.Array(Id, { maxItems: LIMITS.messagesPerBatch }) }, { additionalProperties: false });

export const CountQuery = Type.Object({ kind: Type.Union([Type.Literal('users'), Type.Literal('conversations')]) });

/** A conversation line of an import file: create it, add its members, raise its head. */
export const ConvLine = Type.Object(
  {
    conv: Id,
    members: Type.Array(Id, { maxItems: LIMITS.membersPerChange }),
    category: Type.Optional(Category),
    maxSeq: ReadSeq,
  },
  { additionalProperties: false },
);
export type ConvLine = Static<typeof ConvLine>;

/** A per-user line: the user's read position (and flags) in one conversation. */
export const UserLine = Type.Object(
  {
    uid: Id,
    conv: Id,
    readSeq: ReadSeq,
    muted: Type.Optional(Type.Boolean()),
    markedUnread: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type UserLine = Static<typeof UserLine>;

export const ImportBody = Type.Object(
  {
    conversations: Type.Array(ConvLine, { maxItems: LIMITS.messagesPerBatch }),
    users: Type.Array(UserLine, { maxItems: 10 * LIMITS.messagesPerBatch }),
    dryRun: Type.Optional(Type.Boolean({ description: 'Count what would be written; write nothing.' })),
  },
  { additionalProperties: false },
);

/** A batch: conversations with the user lines that name them, and user lines of conversations already in the store. */
export type ImportBatch = Omit<Static<typeof ImportBody>, 'dryRun'>;
