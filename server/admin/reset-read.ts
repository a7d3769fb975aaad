import type { Engine, UserOpResult } from '../engine/engine.js';
import { refusal, unknownConversation } from '../sync/conversation-errors.js';

/**
 * The operator's undo of a read that went too far (a buggy client read seq 999 at head 2, and
 * every message up to 999 would never count): lowers the user's readSeq in the conversation to
 * `seq`, by default to the conversation's head now, so the next message counts again. It is the
 * user's own "unread from here" at `seq + 1` (the `unread-from` op, rules.ts), of the generation
 * after the one the record holds: the totals move with it, and it is an entry of the user's
 * stream, pushed to the user's devices as any change; a read a device made before it (an older
 * generation) cannot undo it.
 *
 * Retry-safe: lowering to the same seq again changes nothing. Without `seq` the head is read
 * first; a retry may read a higher head, which is at or above where the first attempt lowered to,
 * so it changes nothing either. A reset never raises: a `seq` at or above readSeq is a no-op
 * (the record is read first, by a read of seq 0, which changes nothing).
 */
export async function resetRead(engine: Engine, uid: string, conv: string, seq?: number): Promise<UserOpResult> {
  let target = seq;
  if (target === undefined) {
    target = (await engine.heads([conv])).get(conv);
    if (target === undefined) throw unknownConversation([conv]);
  }
  const [now] = await engine.applyUserOps([{ type: 'read', uid, conv, seq: 0 }]);
  if (!now?.member || !now.state) throw await refusal(engine, uid, conv);
  // What the user deleted stays read (the op's floor): a reset to below it would only move readGen.
  if (Math.max(target, now.state.deletedSeq) >= now.state.readSeq) return now;
  const gen = (now.state.readGen ?? 0) + 1;
  const [result] = await engine.applyUserOps([{ type: 'unread-from', uid, conv, seq: target + 1, gen }]);
  if (!result?.member) throw await refusal(engine, uid, conv);
  return result;
}
