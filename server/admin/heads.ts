import type { HeadsResult } from '../../protocol/admin-replies.js';
import type { HeadAssertion } from '../../protocol/admin-schemas.js';
import type { Engine, UserOp } from '../engine/engine.js';
import { mapLimit } from './map-limit.js';

export type { HeadAssertion, HeadsResult };

/** Conversations whose heads are raised at once (each then one user step per member). */
const CONVERSATIONS_AT_ONCE = 32;

/**
 * Re-asserts conversation heads after the store lost writes: for each conversation, what a
 * message at that seq from no one in particular would do. One conversation step raises the head
 * (max-merge) and reads, in that same step, who the members are and the mode; then each member
 * of a write-diffused conversation gets its lastSeq raised to the seq (no mentions, no sender,
 * so nobody's readSeq moves). A read-diffused conversation needs only the head.
 *
 * Everything a message would meet, this meets the same way (ingest.ts): a member whose join has
 * not landed gets a pending raise that its join counts; a member added after the step joins at
 * the raised head; a switch to write diffusion after the step reads the raised head for its
 * rewrite. Idempotent: asserting a head again, or a lower one, changes nothing.
 */
export async function reassertHeads(engine: Engine, assertions: readonly HeadAssertion[]): Promise<HeadsResult> {
  const wanted = new Map<string, number>();
  for (const a of assertions) wanted.set(a.conv, Math.max(wanted.get(a.conv) ?? 0, a.maxSeq));
  const heads: HeadAssertion[] = [];
  const unknown: string[] = [];
  await mapLimit([...wanted], CONVERSATIONS_AT_ONCE, async ([conv, seq]) => {
    const [recorded] = await engine.recordMessages([{ conv, seq, candidates: [] }]);
    if (!recorded) {
      unknown.push(conv);
      return;
    }
    heads.push({ conv, maxSeq: recorded.info.maxSeq });
    if (recorded.info.large || recorded.members.length === 0) return;
    const ops: UserOp[] = recorded.members.map((uid) => ({ type: 'message', uid, conv, lastSeq: seq, readSeq: 0, mentionSeqs: [], gen: recorded.info.gen }));
    await engine.applyUserOps(ops);
  });
  return { heads: heads.sort((a, b) => (a.conv < b.conv ? -1 : 1)), unknown: unknown.sort() };
}
