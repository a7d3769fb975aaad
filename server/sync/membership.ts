import type { Engine, UserOp, UserOpResult } from '../engine/engine.js';
import type { FlushGate } from './flush-gate.js';

export interface MembershipChange {
  add: readonly string[];
  remove: readonly string[];
  category?: string;
}

export interface MembershipResult {
  members: number;
  large: boolean;
  /** The ops applied and their results, in order (for pushes). */
  ops: UserOp[];
  results: UserOpResult[];
}

/**
 * Membership changes, including the switch between write and read diffusion when a group
 * crosses the threshold. The switch rewrites each member's record (O(members), once per switch)
 * so that nobody's unread count changes: the stored totals stop (or start) summing that group
 * in the same atomic step as the record's mode flips.
 */
export async function changeMembership(
  engine: Engine,
  gate: FlushGate,
  threshold: number,
  conv: string,
  change: MembershipChange,
): Promise<MembershipResult> {
  return gate.run('exclusive', async () => {
    const before = await engine.getConversation(conv);
    const info = await engine.ensureConversation(conv, change.category);
    const count = await engine.changeMembers(conv, change.add, change.remove);
    const large = count > threshold;
    const added = new Set(change.add);
    const ops: UserOp[] = [];
    const modeSwitched = large !== info.large;
    const categoryChanged = before !== null && before.category !== info.category;
    if (modeSwitched) await engine.setConversationMode(conv, large);
    if (modeSwitched || categoryChanged) {
      // Every member, including those listed in `add` who were members already (their join op is a
      // no-op, so skipping them left a stale mode/category). For a new member these ops are
      // no-ops and its join, applied after them, sets both.
      for (const uid of await engine.members(conv)) {
        if (modeSwitched) ops.push({ type: 'mode', uid, conv, large, head: info.maxSeq });
        if (categoryChanged) ops.push({ type: 'category', uid, conv, category: info.category });
      }
    }
    for (const uid of added) ops.push({ type: 'join', uid, conv, head: info.maxSeq, category: info.category, large });
    for (const uid of new Set(change.remove)) ops.push({ type: 'leave', uid, conv });
    const results = await engine.applyUserOps(ops);
    return { members: count, large, ops, results };
  });
}
