import type { ConvState, UnreadSummary } from '../../protocol/types.js';
import { summarize } from '../../protocol/view.js';
import { mergeMentions, type StoredConv, toConvState } from '../../server/engine/rules.js';

/** One user's registers as the spike stores them (functions.lua's fold_read, parsed). */
export interface Registers {
  /** conv → `gen|joinGen|large|category` (membership, written by the conversation step). */
  member: Map<string, string>;
  last: Map<string, number>;
  read: Map<string, number>;
  /** conv → clock × 2 + muted. */
  mute: Map<string, number>;
  /** conv → pending mention seqs (any order, possibly at or below readSeq). */
  mentions: Map<string, number[]>;
}

/** The membership value the conversation step writes: what rules.ts's membership op carries. */
export function memberValue(gen: number, joinGen: number, large: boolean, category: string): string {
  return `${gen}|${joinGen}|${large ? 1 : 0}|${category}`;
}

/**
 * The registers of one conversation as the record rules.ts keeps (`StoredConv`), so the rules'
 * own functions compute what clients see: mentions are the newest
 * `LIMITS.mentionSeqsPerConversation` above readSeq (mergeMentions), and a user who is not a member
 * has no record. What the spike does not store (markedUnread, deletedSeq) is at its blank value.
 */
export function recordOf(conv: string, member: string, r: Omit<Registers, 'member'>): StoredConv {
  const [gen, joinGen, large, ...category] = member.split('|');
  const readSeq = r.read.get(conv) ?? 0;
  return {
    conv,
    member: true,
    lastSeq: r.last.get(conv) ?? 0,
    readSeq,
    mentionSeqs: mergeMentions([], r.mentions.get(conv) ?? [], readSeq),
    muted: (r.mute.get(conv) ?? 0) % 2 === 1,
    markedUnread: false,
    category: category.join('|'),
    large: large === '1',
    deletedSeq: -1,
    gen: Number(gen),
    joinGen: Number(joinGen),
    readGen: 0,
    readMentionSeqs: [],
    mentionsOnly: false,
    at: 0,
    nocountSeqs: [],
  };
}

/** Every conversation the user is a member of, as the states a pull or snapshot carries. */
export function foldStates(r: Registers): ConvState[] {
  const states: ConvState[] = [];
  for (const [conv, member] of r.member) states.push(toConvState(recordOf(conv, member, r)));
  return states;
}

/** `GET /unread`: the fold, summed by protocol/view.ts as the server and the SDK sum it. */
export function foldUnread(uid: string, version: number, r: Registers, heads: Readonly<Record<string, number>>): UnreadSummary {
  return summarize(uid, 'spike', version, foldStates(r), heads);
}

/** A reply of `ZRANGE … WITHSCORES` (member, score, member, score, …) as a map. */
export function scored(reply: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (let i = 0; i + 1 < reply.length; i += 2) out.set(reply[i] as string, Number(reply[i + 1]));
  return out;
}

/** The pending-mentions hash (conv → `seq,seq,…`) as seqs per conversation. */
export function mentionsByConv(hash: ReadonlyMap<string, string>): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const [conv, seqs] of hash) out.set(conv, parseSeqs(seqs));
  return out;
}

function parseSeqs(seqs: string): number[] {
  return seqs.split(',').map(Number);
}

/** A fresh, empty set of registers. */
export function emptyRegisters(): Registers {
  return { member: new Map(), last: new Map(), read: new Map(), mute: new Map(), mentions: new Map() };
}

/**
 * Compaction's snapshot: the registers of every conversation the user is a member of, one line
 * each (`conv`, membership, last, read, mute, pending mentions), after the stream position
 * `version` they were read at. Ids hold no tab or newline (protocol ID_PATTERN).
 */
export function snapshotText(version: number, r: Registers): string {
  const lines = [String(version)];
  for (const [conv, member] of r.member) {
    const rec = recordOf(conv, member, r);
    lines.push([conv, member, rec.lastSeq, rec.readSeq, r.mute.get(conv) ?? 0, rec.mentionSeqs.join(',')].join('\t'));
  }
  return lines.join('\n');
}

export function parseSnapshot(text: string): Registers {
  const r = emptyRegisters();
  if (text === '') return r;
  const lines = text.split('\n');
  for (let i = 1; i < lines.length; i++) {
    const [conv = '', member = '', last, read, mute, mentions = ''] = (lines[i] as string).split('\t');
    r.member.set(conv, member);
    r.last.set(conv, Number(last));
    r.read.set(conv, Number(read));
    r.mute.set(conv, Number(mute));
    if (mentions !== '') r.mentions.set(conv, mentions.split(',').map(Number));
  }
  return r;
}

/**
 * functions.lua's `changed` reply (ids, membership, last, read, mute, mentions per id) laid over
 * `r`: each named conversation's registers are read whole, so they replace what `r` had.
 */
export function overlayChanged(r: Registers, reply: readonly unknown[]): Registers {
  const [ids, member = [], last = [], read = [], mute = [], mentions = []] = reply as Array<Array<string | null> | undefined>;
  const convs = (ids ?? []) as string[];
  convs.forEach((conv, i) => {
    const m = member[i];
    if (m === null || m === undefined) {
      r.member.delete(conv);
      return;
    }
    r.member.set(conv, m);
    r.last.set(conv, Number(last[i] ?? 0));
    r.read.set(conv, Number(read[i] ?? 0));
    r.mute.set(conv, Number(mute[i] ?? 0));
    const seqs = mentions[i];
    if (seqs) r.mentions.set(conv, parseSeqs(seqs));
    else r.mentions.delete(conv);
  });
  return r;
}
