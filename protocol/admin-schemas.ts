import { Type } from '@sinclair/typebox';
import { LIMITS } from './limits.js';
import { Id, Seq } from './schemas.js';

/**
 * Request bodies of the operator endpoints (PROTOCOL.md "Operator endpoints"). The import lines
 * themselves are server/admin/import.ts's ConvLine and UserLine.
 */
export const HeadBody = Type.Object({ maxSeq: Seq }, { additionalProperties: false });

export const HeadsBody = Type.Object(
  { heads: Type.Array(Type.Object({ conv: Id, maxSeq: Seq }, { additionalProperties: false }), { minItems: 1, maxItems: LIMITS.messagesPerBatch }) },
  { additionalProperties: false },
);

/** Ids per reconcile request, and per walk page. */
export const RECONCILE_IDS_MAX = 1000;

export const ReconcileBody = Type.Object(
  {
    cursor: Type.Optional(Type.String({ maxLength: 256, pattern: '^([uc]:[0-9A-Za-z_.:@-]*)?$' })),
    users: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: RECONCILE_IDS_MAX })),
    conversations: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: RECONCILE_IDS_MAX })),
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: RECONCILE_IDS_MAX })),
    repair: Type.Boolean(),
    graceMs: Type.Integer({ minimum: 0, maximum: 60_000 }),
  },
  { additionalProperties: false },
);

export const HeadsQueryBody = Type.Object({ convs: Type.Array(Id, { maxItems: LIMITS.messagesPerBatch }) }, { additionalProperties: false });

export const CountQuery = Type.Object({ kind: Type.Union([Type.Literal('users'), Type.Literal('conversations')]) });
