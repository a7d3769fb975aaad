import type { Engine, UserOpResult } from '../engine/engine.js';
import { refusal, unknownConversation } from '../sync/conversation-errors.js';

/**
 * The operator's undo of a read that went too far (a buggy client read seq 999 at head 2, and
 * every message up to 999 would never count): lowers the user's readSeq in the conversation to
 * `seq`, by default to the conversation's head now, so the next message counts again. One user
 * step (the `reset-read` op, rules.ts): the totals move with it, and it is an entry of the
 * user's stream, pushed to the user's devices as any change.
 *
 * Retry-safe: lowering to the same seq again changes nothing. Without `seq` the head is read
 * first; a retry may read a higher head, which is at or above where the first attempt lowered to,
 * so it changes nothing either. A reset never raises: a `seq` at or above readSeq is a no-op.
 */
export async function resetRead(engine: Engine, uid: string, conv: string, seq?: number): Promise<UserOpResult> {
  let target = seq;
  if (target === undefined) {
    target = (await engine.heads([conv])).get(conv);
    if (target === undefined) throw unknownConversation([conv]);
  }
  const [result] = await engine.applyUserOps([{ type: 'reset-read', uid, conv, seq: target }]);
  if (!result?.member) throw await refusal(engine, uid, conv);
  return result;
}
