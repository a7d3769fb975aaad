import type { NotificationLevel } from '../../protocol/types.js';
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
 * - `read`: raise readSeq. `gen`: the read generation the reader saw (ConvState.readGen): a read
 *   made before an "unread from here" it had not seen (an older generation) changes nothing; one
 *   of a newer generation than the record's sets the register (readGen, readSeq) to (gen, seq).
 *   Absent: the record's generation (the read always raises).
 * - `unread-from`: the user's "unread from here": the read register becomes (gen, seq − 1) if that
 *   is lexicographically above it (never below deletedSeq); spent mentions above seq − 1 count
 *   again. `gen` is the generation the act was based on plus one, so a retry is a no-op and a read
 *   made before it is ignored. Absent: the record's generation + 1, taken in the user step (a
 *   retry then makes another generation, with the same readSeq). `floor`: readSeq is set no lower
 *   (the join head of the membership `joinGen` the act was made in: messages from before the join
 *   never count); with `joinGen`, an op of another membership than the record's changes nothing
 *   (the user left and joined again in between). The operator's reset-read is this op without
 *   them (admin/reset-read.ts).
 * - `membership`: the conversation-level state of this user as of generation `gen` (member or
 *   not, mode, category, the join tag and the conversation's head); an op of an older generation
 *   than the record's is ignored.
 * - `settings`: flags, and `deleteAt` (hide the conversation up to the larger of it and lastSeq).
 *   `level` sets the notification level (muted = level 'none'); `muted` alone sets 'none' or
 *   'all'; both given: `level` wins.
 * - `message`'s `nocountSeqs` (issue 43): seqs that do not count (a `counts: false` message, a
 *   recall), merged into the record's grow-only set; their mentions are dropped.
 * - `message`'s `at`: the message service's timestamp (ms) of the newest message of the op; the
 *   record's last activity is a max-register of it (absent: unchanged).
 * - `membership` with `rebase`: the operator's repair of a head that went wrong
 *   (admin/rebase.ts): a new membership at `joinGen` (the rebase's generation) whose lastSeq is
 *   SET to `head` (the lowered head), readSeq, deletedSeq and mentions lowered to at most it.
 *   Applied once per rebase generation (a repeat finds the same joinGen and only max-merges).
 */
export type UserOp =
  | {
      type: 'message';
      uid: string;
      conv: string;
      lastSeq: number;
      readSeq: number;
      mentionSeqs: readonly number[];
      gen?: number;
      at?: number;
      nocountSeqs?: readonly number[];
    }
  | { type: 'read'; uid: string; conv: string; seq: number; gen?: number }
  | MembershipOp
  | { type: 'settings'; uid: string; conv: string; muted?: boolean; level?: NotificationLevel; markedUnread?: boolean; deleteAt?: number }
  | { type: 'unread-from'; uid: string; conv: string; seq: number; gen?: number; floor?: number; joinGen?: number };

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
      /** The conversation's last activity (ms) when the op was made: a lower bound for the record's `at` (issue 43). */
      at?: number;
      /**
       * Issue 43: a rewrite to write diffusion gives each member the conversation's non-counting
       * seqs (those recalled while it was read-diffused), merged as a message's are.
       */
      nocountSeqs?: readonly number[];
    }
  | { type: 'membership'; uid: string; conv: string; gen: number; member: false };
