import type { ImportBatchResult } from '../../protocol/admin-replies.js';
import { ConvLine, type ImportBatch, UserLine } from '../../protocol/admin-schemas.js';
import { decode } from '../../protocol/schemas.js';
import type { Engine, UserOp } from '../engine/engine.js';
import { changeMembership, memberOp } from '../sync/membership.js';
import { mapLimit } from './map-limit.js';

export type { ImportBatch, ImportBatchResult };
export { ConvLine, UserLine };

export type ImportLine = { kind: 'conv'; line: ConvLine } | { kind: 'user'; line: UserLine };

/** One line of JSON text as an import line; throws `invalid_request` naming the field. */
export function parseImportLine(text: string): ImportLine {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('not valid JSON');
  }
  if (typeof value === 'object' && value !== null && 'uid' in value) return { kind: 'user', line: decode(UserLine, value) };
  return { kind: 'conv', line: decode(ConvLine, value) };
}

/** Conversations imported at once (each a membership change, a head raise, then user steps). */
const CONVERSATIONS_AT_ONCE = 64;
const OPS_PER_CALL = 5_000;

/**
 * Bulk backfill, idempotent: everything is a max-merge, so importing a file twice, or a file
 * that overlaps what the store has, leaves the larger values. Per conversation:
 *
 * 1. the conversation step of a membership change creates it and adds its members (and the users
 *    of its user lines): new members join at the head the store has (0 for a new one);
 * 2. one conversation step raises its head to `maxSeq` and reads the members and the mode, as a
 *    message would (heads.ts);
 * 3. one user step per member: its join op (the one membership.ts would apply), lastSeq raised to
 *    `maxSeq` (write diffusion), readSeq to the user line's `readSeq` — or to `maxSeq` for a
 *    member without a user line (nothing unread) — and the flags of the user line.
 *
 * User lines of a conversation the batch does not carry apply to a conversation already in the
 * store (read position and flags only). Nothing is written with `dryRun`.
 */
export async function importBatch(engine: Engine, threshold: number, batch: ImportBatch, dryRun: boolean): Promise<ImportBatchResult> {
  const byConv = new Map<string, UserLine[]>();
  for (const u of batch.users) {
    const list = byConv.get(u.conv);
    if (list) list.push(u);
    else byConv.set(u.conv, [u]);
  }
  const carried = new Set(batch.conversations.map((c) => c.conv));
  const elsewhere = [...byConv.keys()].filter((conv) => !carried.has(conv));
  const missing = new Set(await engine.missingConversations(elsewhere));
  const unknown = elsewhere.filter((conv) => missing.has(conv)).flatMap((conv) => (byConv.get(conv) ?? []).map((u) => ({ uid: u.uid, conv })));
  const known = elsewhere.filter((conv) => !missing.has(conv));
  let pairs = 0;
  for (const c of batch.conversations) pairs += new Set([...c.members, ...(byConv.get(c.conv) ?? []).map((u) => u.uid)]).size;
  for (const conv of known) pairs += byConv.get(conv)?.length ?? 0;
  const result = { conversations: batch.conversations.length, pairs, unknown };
  if (dryRun) return result;

  const ops: UserOp[] = [];
  await mapLimit(batch.conversations, CONVERSATIONS_AT_ONCE, async (c) => {
    const lines = new Map((byConv.get(c.conv) ?? []).map((u) => [u.uid, u]));
    const members = [...new Set([...c.members, ...lines.keys()])];
    // The conversation step of a membership change (membership.ts); its join ops go out below,
    // in the same user step as the read position, one script per user instead of two.
    const step = await engine.changeMembers(c.conv, { add: members, remove: [], threshold, ...(c.category !== undefined ? { category: c.category } : {}) });
    // A mode or category change (a new conversation above the threshold) rewrites every member:
    // the normal way, which also clears the marker.
    if (step.rewrite) await changeMembership(engine, threshold, c.conv, { add: [], remove: [] });
    const joins = new Map(step.joins.map((tag) => [tag.uid, memberOp(step.info, tag)]));
    const recorded = c.maxSeq > 0 ? ((await engine.recordMessages([{ conv: c.conv, seq: c.maxSeq, candidates: [] }]))[0] ?? null) : null;
    // Every member the head raise listed gets the head, as from a message (heads.ts); the
    // file's members also their read position, in the same op.
    const raised = new Set(recorded && !recorded.info.large ? recorded.members : []);
    const named = new Set(members);
    for (const uid of raised) if (!named.has(uid)) ops.push({ type: 'message', uid, conv: c.conv, lastSeq: c.maxSeq, readSeq: 0, mentionSeqs: [] });
    for (const uid of members) {
      const join = joins.get(uid);
      if (join) ops.push(join);
      const u = lines.get(uid);
      const readSeq = u ? u.readSeq : c.maxSeq;
      if (raised.has(uid)) ops.push({ type: 'message', uid, conv: c.conv, lastSeq: c.maxSeq, readSeq, mentionSeqs: [] });
      else ops.push({ type: 'read', uid, conv: c.conv, seq: readSeq });
      if (u) pushFlags(ops, u);
    }
  });
  for (const conv of known) {
    for (const u of byConv.get(conv) ?? []) {
      ops.push({ type: 'read', uid: u.uid, conv, seq: u.readSeq });
      pushFlags(ops, u);
    }
  }
  for (let i = 0; i < ops.length; i += OPS_PER_CALL) await engine.applyUserOps(ops.slice(i, i + OPS_PER_CALL));
  return result;
}

function pushFlags(ops: UserOp[], u: UserLine): void {
  if (u.muted === undefined && u.markedUnread === undefined) return;
  ops.push({
    type: 'settings',
    uid: u.uid,
    conv: u.conv,
    ...(u.muted !== undefined ? { muted: u.muted } : {}),
    ...(u.markedUnread !== undefined ? { markedUnread: u.markedUnread } : {}),
  });
}
