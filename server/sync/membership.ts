import type { ConvInfo, Engine, MembershipOp, MembersStep, MemberTag, UserOpResult } from '../engine/engine.js';
import { afterPartOfIt } from '../engine/store-errors.js';

export interface MembershipChange {
  add: readonly string[];
  remove: readonly string[];
  category?: string;
}

export interface MembershipResult {
  members: number;
  large: boolean;
  /** The ops applied and their results, in order. */
  ops: MembershipOp[];
  results: UserOpResult[];
  /** The conversation's generation before the change's step and after it (equal when it changed nothing): its topics' delta (topics.ts). */
  gens: { from: number; to: number };
}

/** The membership op that makes `tag` a member as of `info` (the roster implies it for every listed member). */
export function memberOp(info: ConvInfo, tag: MemberTag): MembershipOp {
  return {
    type: 'membership',
    uid: tag.uid,
    conv: info.conv,
    gen: info.gen,
    member: true,
    joinGen: tag.joinGen,
    joinHead: tag.joinHead,
    head: info.maxSeq,
    large: info.large,
    category: info.category,
    // The conversation's last activity: a joiner, or a member rewritten to write diffusion, has it too.
    ...(info.at !== undefined && info.at > 0 ? { at: info.at } : {}),
  };
}

/** The op with the conversation's non-counting seqs above the member's join head (those at or below it are never unread). */
function withNocount(op: MembershipOp, nocount: readonly number[], joinHead: number): MembershipOp {
  if (!op.member) return op;
  const above = nocount.filter((seq) => seq > joinHead);
  return above.length > 0 ? { ...op, nocountSeqs: above } : op;
}

/**
 * A membership change: one conversation step (members, category, the write/read diffusion
 * decision against the threshold, the generation and each new member's join head, atomically),
 * then one user step per member it touches. When the mode or category changed — now, or in an
 * earlier change whose rewrite never finished — every member's record is rewritten from a roster
 * read in one step, and the conversation's rewrite marker is cleared only after that.
 *
 * Safe to retry after a failure at any point: the conversation step reports the same joins,
 * leaves and pending rewrite again, so a retry redoes every user step the first attempt may have
 * missed (they are idempotent), never skipping one because the conversation already changed.
 * Another process may run anything between the steps: membership ops carry the generation, and
 * only a newer one wins (rules.ts).
 */
export async function changeMembership(engine: Engine, threshold: number, conv: string, change: MembershipChange): Promise<MembershipResult> {
  const step = await engine.changeMembers(conv, {
    add: change.add,
    remove: change.remove,
    threshold,
    ...(change.category !== undefined ? { category: change.category } : {}),
  });
  // The conversation step landed: a failure from here on leaves the change half made (its retry completes it).
  try {
    return await applyMembersStep(engine, conv, step);
  } catch (err) {
    throw afterPartOfIt(err);
  }
}

/** The user steps of a conversation step that landed (and the rewrite it asks for): safe to repeat. */
export async function applyMembersStep(engine: Engine, conv: string, step: MembersStep): Promise<MembershipResult> {
  const byUser = new Map<string, MembershipOp>();
  // The non-counting seqs go into write-diffused records only: a read-diffused conversation keeps
  // them itself, and a recall there drops mentions through its index or from every member
  // (conv_record.lua '#M'). A joiner's op repeats for every member a topic's sync restates: in a
  // read-diffused record they were a second copy, which dropped mentions apart from that rule.
  const nocount = step.info.large ? [] : (step.nocount ?? []);
  for (const tag of step.joins) byUser.set(tag.uid, withNocount(memberOp(step.info, tag), nocount, tag.joinHead));
  for (const uid of step.leaves) byUser.set(uid, { type: 'membership', uid, conv, gen: step.info.gen, member: false });
  let rewriteGen: number | undefined;
  if (step.rewrite) {
    const roster = await engine.roster(conv);
    if (roster) {
      rewriteGen = roster.info.gen;
      // Issue 43: a rewrite to write diffusion gives the records the seqs recalled while the
      // conversation was read-diffused (read after the step: a later recall reaches every member).
      const nocount = roster.info.large ? [] : ((await engine.headExtras([conv])).get(conv)?.nocount ?? []);
      // The roster is as new as the step or newer: its ops replace the step's for the same user.
      for (const tag of roster.members) byUser.set(tag.uid, withNocount(memberOp(roster.info, tag), nocount, tag.joinHead));
    }
  }
  const ops = [...byUser.values()];
  const results = await engine.applyUserOps(ops);
  if (rewriteGen !== undefined) await engine.finishRewrite(conv, rewriteGen);
  return { members: step.info.memberCount, large: step.info.large, ops, results, gens: { from: step.fromGen, to: step.info.gen } };
}
