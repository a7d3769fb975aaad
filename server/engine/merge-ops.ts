import { LIMITS } from '../../protocol/limits.js';
import type { MessageEvent } from '../../protocol/types.js';
import type { RecordedMessage, UserOp } from './engine.js';
import { mergeMentions, mergeNocount } from './rules.js';

type MessageOp = Extract<UserOp, { type: 'message' }>;

/**
 * One op per (user, conversation) for the whole batch, only for users the conversation step
 * listed as members: every member of a write-diffused conversation gets its newest seq; senders
 * (their own message is read) and mentioned users get theirs in any conversation. Read diffusion
 * thus costs O(1) writes per message whatever the group size. Mention seqs are kept to the
 * newest `LIMITS.mentionSeqsPerConversation` per op: the store keeps no more than that.
 *
 * Issue 43: every op of a conversation carries the largest `at` of its messages in the batch (the
 * last activity, a max-register; none when no message has one), and an @all message
 * (`mentionAll`) of a write-diffused conversation is a mention of every listed member but its
 * sender (a read-diffused one keeps its @all seqs at the conversation: conv_record.lua). A
 * read-diffused conversation's non-counting seqs are kept at the conversation too; only the
 * members its step names (`drops`: mentions of recalled seqs) get them, to drop those mentions.
 */
export function mergeOps(messages: readonly MessageEvent[], byConv: ReadonlyMap<string, RecordedMessage>): MessageOp[] {
  const ops = new Map<string, MessageOp & { mentionSeqs: number[] }>();
  // `gen`: the generation the conversation step read (a member rejoined or rebased since ignores
  // the op), passed in by callers that hold the step's reply already.
  const opFor = (uid: string, conv: string, gen: number): MessageOp & { mentionSeqs: number[] } => {
    const key = `${uid}\u0000${conv}`;
    let op = ops.get(key);
    if (!op) {
      op = { type: 'message', uid, conv, lastSeq: 0, readSeq: 0, mentionSeqs: [], gen };
      ops.set(key, op);
    }
    return op;
  };
  const listed = new Map<string, ReadonlySet<string>>();
  for (const [conv, r] of byConv) listed.set(conv, new Set(r.members));
  const top = new Map<string, number>();
  const lastAt = new Map<string, number>();
  const everyone: MessageEvent[] = [];
  // Issue 43: per write-diffused conversation, the seqs of the batch that do not count (its
  // `counts: false` messages and the seqs its messages recall); none for most batches.
  let nocount: Map<string, number[]> | undefined;
  for (const m of messages) {
    const r = byConv.get(m.conv);
    const members = listed.get(m.conv);
    if (!r || !members) continue;
    top.set(m.conv, Math.max(top.get(m.conv) ?? 0, m.seq));
    if (m.at !== undefined) lastAt.set(m.conv, Math.max(lastAt.get(m.conv) ?? 0, m.at));
    const counts = m.counts !== false;
    if ((!counts || (m.recalls !== undefined && m.recalls.length > 0)) && !r.info.large) {
      nocount ??= new Map();
      const seqs = nocount.get(m.conv) ?? [];
      if (!counts) seqs.push(m.seq);
      if (m.recalls !== undefined) seqs.push(...m.recalls);
      nocount.set(m.conv, seqs);
    }
    // A non-counting message's mentions (and @all) are ignored.
    if (m.mentionAll === true && !r.info.large && counts) everyone.push(m);
    if (members.has(m.sender)) {
      const own = opFor(m.sender, m.conv, r.info.gen);
      own.lastSeq = Math.max(own.lastSeq, m.seq);
      own.readSeq = Math.max(own.readSeq, m.seq);
    }
    // Most messages mention nobody: no Set for them. An @all message's own mentions are in its
    // @all (below, or the read-diffused conversation's set): one mention per member, once.
    if (m.mentions === undefined || m.mentions.length === 0 || m.mentionAll === true || !counts) continue;
    for (const uid of new Set(m.mentions)) {
      if (uid === m.sender || !members.has(uid)) continue;
      const op = opFor(uid, m.conv, r.info.gen);
      op.lastSeq = Math.max(op.lastSeq, m.seq);
      op.mentionSeqs.push(m.seq);
    }
  }
  for (const [conv, r] of byConv) {
    if (r.info.large) continue;
    const seq = top.get(conv) ?? 0;
    for (const uid of r.members) {
      const op = opFor(uid, conv, r.info.gen);
      op.lastSeq = Math.max(op.lastSeq, seq);
    }
  }
  for (const m of everyone) {
    const r = byConv.get(m.conv);
    if (!r) continue;
    for (const uid of r.members) if (uid !== m.sender) opFor(uid, m.conv, r.info.gen).mentionSeqs.push(m.seq);
  }
  if (nocount !== undefined) {
    for (const op of ops.values()) {
      const seqs = nocount.get(op.conv);
      if (seqs !== undefined) op.nocountSeqs = mergeNocount([], seqs);
    }
  }
  // A read-diffused conversation names the members whose mentions its step found recalled.
  for (const [conv, r] of byConv) {
    // A mention of a seq recalled already is left out (ingest_flush.lua does the same) ...
    for (const [uid, seqs] of r.ahead ?? []) {
      const op = opFor(uid, conv, r.info.gen);
      op.mentionSeqs = op.mentionSeqs.filter((seq) => !seqs.includes(seq));
    }
    // ... and one the record holds goes with the seq joining the record's set.
    for (const [uid, seqs] of r.drops ?? []) {
      const op = opFor(uid, conv, r.info.gen);
      op.nocountSeqs = mergeNocount(op.nocountSeqs ?? [], seqs);
    }
  }
  if (lastAt.size > 0) {
    for (const op of ops.values()) {
      const at = lastAt.get(op.conv);
      if (at !== undefined) op.at = at;
    }
  }
  // The engine's own cap (rules.ts), applied here only when an op would carry more than it keeps.
  for (const op of ops.values()) {
    if (op.mentionSeqs.length > LIMITS.mentionSeqsPerConversation) op.mentionSeqs = mergeMentions(op.mentionSeqs, [], -1);
  }
  return [...ops.values()];
}
