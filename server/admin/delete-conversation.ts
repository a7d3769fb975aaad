import type { DeleteResult } from '../../protocol/admin-replies.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, UserOp } from '../engine/engine.js';

export type { DeleteResult };

/** Members removed per applyUserOps call (two ops each). */
const MEMBERS_PER_STEP = 500;

/**
 * Deletes a conversation for all its members, with its share of every total: one conversation
 * step, then one user step per member, then the deletion record goes.
 *
 * 1. `beginDelete` (atomic on the conversation): the conversation stops existing — a message for
 *    it is refused with 404 from then on, a membership change creates a new conversation — and
 *    its roster moves to a deletion record under a generation newer than any it gave.
 * 2. Each member gets, in one user step, the delete-for-me op (hidden up to the head: readSeq
 *    raised, so nothing is unread) and then a leave at the deletion's generation: the record
 *    stays as a non-member tombstone carrying that generation, so a membership op of the old
 *    conversation still on its way (older generation) cannot bring it back, and a message
 *    recorded before step 1 and applied after it only raises an invisible record. Totals lose
 *    the conversation's share in that same step, and the stream gets `state: null`.
 *    Each member's read receipt position in it is dropped after that step.
 * 3. `finishDelete` drops the deletion record.
 *
 * A retry after a failure anywhere finds the deletion record and does steps 2 and 3 again (both
 * idempotent). A conversation re-created meanwhile (a membership change after step 1) is a new
 * conversation whose generations are newer than the deletion's, so its members' joins win over
 * the leaves; deleting it too merges its members into the deletion. Null: nothing to delete.
 */
export async function deleteConversation(engine: Engine, admin: EngineAdmin, conv: string): Promise<DeleteResult | null> {
  const step = await admin.beginDelete(conv);
  if (!step) return null;
  for (let i = 0; i < step.members.length; i += MEMBERS_PER_STEP) {
    const ops: UserOp[] = step.members.slice(i, i + MEMBERS_PER_STEP).flatMap((uid): UserOp[] => [
      { type: 'settings', uid, conv, deleteAt: step.maxSeq },
      { type: 'membership', uid, conv, gen: step.gen, member: false },
    ]);
    await engine.applyUserOps(ops);
    // Read receipts: the members' positions go with the conversation (a raise after step 1 finds
    // no conversation and records nothing), so a conversation re-created under this id starts clean.
    await Promise.all(step.members.slice(i, i + MEMBERS_PER_STEP).map((uid) => engine.readPositions.drop(uid, [conv])));
  }
  await admin.finishDelete(conv, step.gen);
  return { conv, members: step.members.length, gen: step.gen };
}
