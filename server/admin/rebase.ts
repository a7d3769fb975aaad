import type { RebaseResult } from '../../protocol/admin-replies.js';
import { RedpointError } from '../../protocol/errors.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, UserOp } from '../engine/engine.js';
import { mapLimit } from './map-limit.js';

export type { RebaseResult };

/** Members rebased per applyUserOps call. */
const MEMBERS_PER_STEP = 500;
/** Members restreamed at once (one user step each). */
const RESTREAMS_AT_ONCE = 32;

/**
 * The operator's repair of a conversation whose head went wrong (a message id or a timestamp
 * posted as a seq before MAX_SEQ_JUMP refused it): lowers the head to `seq` and makes every
 * member's record agree. The one operator act that lowers max-registers, so it works by
 * generation, as a membership change does:
 *
 * 1. One conversation step (`EngineAdmin.rebaseConversation`): the head becomes min(head, seq),
 *    the generation G is newer than every one given, and every member's join tag is (G, at most
 *    the new head).
 * 2. Each member gets a rebase op at G (rules.ts): its record starts a membership at G with
 *    lastSeq SET to the new head, readSeq, deletedSeq and mentions lowered to at most it. A
 *    message op recorded before step 1 carries an older generation and is ignored by a record
 *    rebased at G, so a late write cannot bring the old head back; a membership op older than G
 *    is ignored as ever. A message with a seq at or below the new head, recorded before or after
 *    step 1, is counted: lastSeq is the new head.
 * 3. A message recorded after step 1 (seq above the new head, generation G) whose op reached a
 *    member before that member's rebase op was lowered by it: one conversation step reads the
 *    head now, and every member of a write-diffused conversation gets a message op at it
 *    (generation G or newer), as `PUT /v1/heads` does. Every message op after this one came
 *    after every rebase op.
 * 4. Each member's stream starts over (new epoch, a snapshot): clients drop what they held,
 *    which a max-merging view (a read-diffused conversation's head) would otherwise keep.
 *
 * Repeating it lowers to `seq` again: safe as long as no message above `seq` arrived since (the
 * head the reply names); a member already rebased at G only max-merges. Mentions and reads above
 * the new head that raced the rebase are lowered with the bad ones (a sender whose message landed
 * between steps 1 and 2 sees it unread; one recorded before step 1 and applied after it is
 * ignored with its generation, its read too: test/admin/interleavings.ts), and a read above the
 * new head that lands after a member's rebase (sent by a client that had not yet seen it) stands until
 * `redpoint reset-read`. A membership change that rewrites the members (a mode or category
 * switch) between steps 1 and 2 restates them at G first, and their rebase ops then find G taken:
 * they keep the old lastSeq until the rebase runs again. Former members are not in the roster and
 * keep theirs. Null: no such conversation.
 */
export async function rebaseConversation(engine: Engine, admin: EngineAdmin, conv: string, seq: number): Promise<RebaseResult | null> {
  const step = await admin.rebaseConversation(conv, seq);
  if (!step) return null;
  for (let i = 0; i < step.members.length; i += MEMBERS_PER_STEP) {
    const ops: UserOp[] = step.members.slice(i, i + MEMBERS_PER_STEP).map((tag) => ({
      type: 'membership',
      uid: tag.uid,
      conv,
      gen: step.gen,
      member: true,
      joinGen: tag.joinGen,
      joinHead: tag.joinHead,
      head: step.head,
      large: step.large,
      category: step.category,
      rebase: true,
    }));
    await engine.applyUserOps(ops, { results: false });
  }
  // A max-merge at the new head: it raises nothing, it reads the head and the members now.
  const [now] = await engine.recordMessages([{ conv, seq: step.head, candidates: [] }]);
  // Step 1 did not hold: Redis was replaced by an empty server and the conversation came back
  // from PostgreSQL as it was before (its old generation and head), or it was deleted. The
  // members' records are lowered, the head is not: no reply may say it is.
  if (!now || now.info.gen < step.gen) {
    throw new RedpointError(
      'internal',
      `rebase of ${conv}: its head was lost between the rebase's steps (Redis replaced, or the conversation deleted); run it again`,
    );
  }
  if (!now.info.large && now.members.length > 0) {
    const head = now.info.maxSeq;
    const gen = now.info.gen;
    await engine.applyUserOps(
      now.members.map((uid): UserOp => ({ type: 'message', uid, conv, lastSeq: head, readSeq: 0, mentionSeqs: [], gen })),
      { results: false },
    );
  }
  await mapLimit(step.members, RESTREAMS_AT_ONCE, (tag) => admin.rebuildUser(tag.uid, { restream: true }));
  return { conv, before: step.before, head: step.head, gen: step.gen, members: step.members.length };
}
