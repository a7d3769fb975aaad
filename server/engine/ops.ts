/** The ops a user step applies and the join tag they carry: a leaf both engines and rules.ts share. */

/** A member's join tag: the generation and head at which its current membership began. */
export interface MemberTag {
  uid: string;
  joinGen: number;
  joinHead: number;
}

/**
 * One change to one user's state of one conversation (rules.ts holds what each does).
 * - `message`: messages up to `lastSeq` were delivered; the user sent up to `readSeq`;
 *   `mentionSeqs` mention them (at most LIMITS.mentionSeqsPerConversation). Only for users the
 *   conversation step listed as members. `gen`: the conversation's generation in that step; a
 *   member whose membership began later (joinGen above it: a rejoin, or an operator's rebase)
 *   ignores the op, which its join or rebase already covered. Absent: no such check.
 * - `read`: raise readSeq.
 * - `membership`: the conversation-level state of this user as of generation `gen` (member or
 *   not, mode, category, the join tag and the conversation's head); an op of an older generation
 *   than the record's is ignored.
 * - `settings`: flags, and `deleteAt` (hide the conversation up to the larger of it and lastSeq).
 * - `reset-read`: the operator's undo of a read that went too far: LOWER readSeq to `seq` (never
 *   below deletedSeq: what was deleted stays read). Not a max-merge, but idempotent; mentions
 *   dropped by the read are not restored, and markedUnread is left as is.
 * - `membership` with `rebase`: the operator's repair of a head that went wrong
 *   (admin/rebase.ts): a new membership at `joinGen` (the rebase's generation) whose lastSeq is
 *   SET to `head` (the lowered head), readSeq, deletedSeq and mentions lowered to at most it.
 *   Applied once per rebase generation (a repeat finds the same joinGen and only max-merges).
 */
export type UserOp =
  | { type: 'message'; uid: string; conv: string; lastSeq: number; readSeq: number; mentionSeqs: readonly number[]; gen?: number }
  | { type: 'read'; uid: string; conv: string; seq: number }
  | MembershipOp
  | { type: 'settings'; uid: string; conv: string; muted?: boolean; markedUnread?: boolean; deleteAt?: number }
  | { type: 'reset-read'; uid: string; conv: string; seq: number };

export type MembershipOp =
  | {
      type: 'membership';
      uid: string;
      conv: string;
      gen: number;
      member: true;
      joinGen: number;
      joinHead: number;
      /** The conversation's maxSeq when the op was made (a lower bound for lastSeq). */
      head: number;
      large: boolean;
      category: string;
      /** An operator's rebase: lowers the record to `head` instead of raising (see above). */
      rebase?: true;
    }
  | { type: 'membership'; uid: string; conv: string; gen: number; member: false };
