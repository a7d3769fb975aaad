import { nanoid } from 'nanoid';
import type { ConvEntry, Snapshot } from '../../../protocol/types.js';
import type { ConvInfo, MemberTag, StoredUserState } from '../engine.js';
import type { StoredConv } from '../rules.js';
import { decodeEntries, decodeMemberTag, decodeRecordFast, decodeSnapshotText, encodeRecord } from '../state-text.js';
import { type EntryLog, entryTexts } from './entry-log.js';
import { EMPTY_TABLE, type TextTable, tableEntries, tableForEach, tableGet, tableSet, tableSize } from './text-table.js';

/**
 * The memory engine's state: one object per conversation and per user, and the helpers that read
 * and write them. The engine (memory-engine.ts) and its admin (memory-admin.ts) both work on it.
 */

/** 2^30: a generation (any safe integer) split in two parts below it, each a small integer V8 keeps unboxed. */
const GEN_SPLIT = 2 ** 30;

// `| 0`: arithmetic on a double yields a double even when it is integral; only an int32 is stored unboxed.
const highPart = (value: number): number => Math.floor(value / GEN_SPLIT) | 0;
const lowPart = (value: number): number => (value - Math.floor(value / GEN_SPLIT) * GEN_SPLIT) | 0;

/** A conversation's state; each generation kept as two small integers, which V8 stores unboxed (DESIGN.md §14). */
/** The empty @all list every conversation shares until it has one. */
export const NO_SEQS: readonly number[] = Object.freeze([]);

export class MemoryConversation {
  maxSeq = 0;
  large = false;
  /** Issue 43 (engine.ts HeadExtra): the last activity (every conversation: membership ops carry it) and the @all seqs (kept while read-diffused). */
  lastAt = 0;
  /** Shared while empty (most conversations): no array per conversation. */
  mentionAll: readonly number[] = NO_SEQS;
  /** The head when it became read-diffused: @all seqs at or below it were write-diffused messages, counted in the records (conv_record.lua '#L'). */
  largeFrom = 0;
  /** Issue 43: the non-counting seqs, in either mode (conv_record.lua '#N'), the newest `LIMITS.nocountSeqsPerConversation`. */
  nocount: readonly number[] = NO_SEQS;
  /**
   * Mentions made while read-diffused: seq → the members its message mentioned (conv_record.lua's
   * ':m' index, kept across switches), the newest `LIMITS.nocountSeqsPerConversation` pairs; a
   * recall while read-diffused drops the pairs it finds. Made on first use.
   */
  mentioned: Map<number, Set<string>> | undefined;
  /**
   * The index holds every mention of the seqs above this one (conv_record.lua '#M'): raised to the
   * head when the conversation becomes read-diffused (the records hold the mentions made before)
   * and past the pairs a full index forgets. A recall at or below it reaches every member.
   */
  mentionFloor = 0;
  /** uid → the member's tag text (state-text.ts encodeMemberTag, as the Redis engine stores it). */
  members: TextTable = EMPTY_TABLE;
  private genHigh = 0;
  private genLow = 0;
  private rewriteHigh = 0;
  private rewriteLow = 0;

  constructor(public category: string) {}

  get gen(): number {
    return this.genHigh * GEN_SPLIT + this.genLow;
  }

  set gen(value: number) {
    this.genHigh = highPart(value);
    this.genLow = lowPart(value);
  }

  /** Generation of a mode/category change whose member rewrite is not finished (0: none). */
  get rewrite(): number {
    return this.rewriteHigh * GEN_SPLIT + this.rewriteLow;
  }

  set rewrite(value: number) {
    this.rewriteHigh = highPart(value);
    this.rewriteLow = lowPart(value);
  }
}

/** One user's state in few heap objects: numbers as fields, records and stream as flat strings (DESIGN.md §14). */
export class MemoryUser implements EntryLog {
  /** Chosen at the user's first visible change; until then the user is unseen (UNSEEN_EPOCH). */
  epoch: string | undefined = undefined;
  version = 0;
  base = 0;
  memberCount = 0;
  total = 0;
  mentions = 0;
  /**
   * Unread per category, in the order categories first counted: nothing yet, the default
   * category's alone (most users have no other), or a Map once another one counts.
   */
  categories: number | Map<string, number> | undefined = undefined;
  /** conv → the record's text (encodeRecord), decoded when used. */
  records: TextTable = EMPTY_TABLE;
  /**
   * Entries after `base`, in version order: entry `i` is version `base + 1 + i`. Kept as the
   * Redis engine's entry texts (../state-text.ts), decoded when pulled.
   */
  entryChunks: string | string[] = '';
  entryCount = 0;
  entryTail = 0;
  /** The newest snapshot: its version and its text (decodeSnapshotText). */
  snapshotVersion = 0;
  snapshotText = '';
}

/** Up to `limit` of the user's stream entries after version `v` (or after its base, if later), decoded. */
export function entriesAfter(user: MemoryUser, v: number, limit = Number.POSITIVE_INFINITY): ConvEntry[] {
  const from = Math.max(user.base, v);
  return decodeEntries(entryTexts(user, from - user.base, limit), from + 1);
}

/** The user's newest snapshot, decoded. */
export function snapshotOf(user: MemoryUser): Snapshot {
  return { v: user.snapshotVersion, convs: decodeSnapshotText(user.snapshotText) };
}

export function recordOf(user: MemoryUser, conv: string): StoredConv | undefined {
  const text = tableGet(user.records, conv);
  return text === undefined ? undefined : decodeRecordFast(conv, text);
}

export function putRecord(user: MemoryUser, rec: StoredConv): void {
  user.records = tableSet(user.records, rec.conv, encodeRecord(rec));
}

/** Every record of the user (left and pending ones too), in the order they were created. */
export function recordsOf(user: MemoryUser): StoredConv[] {
  return tableEntries(user.records).map(([conv, text]) => decodeRecordFast(conv, text));
}

export function memberRecords(user: MemoryUser): StoredConv[] {
  return recordsOf(user).filter((r) => r.member);
}

/** How many conversations whose id starts with `prefix` the user is a member of (a thread follow's cap: Engine.claimJoins `within`). */
export function membersWithin(user: MemoryUser, prefix: string): number {
  let n = 0;
  tableForEach(user.records, (_text, conv) => {
    if (conv.startsWith(prefix) && recordOf(user, conv)?.member === true) n++;
  });
  return n;
}

const ONE = 49; // '1'

/** The read-diffused conversations the user is a member of, from the records' flag characters alone (every pull asks). */
export function largeMemberConvs(user: MemoryUser): string[] {
  const out: string[] = [];
  tableForEach(user.records, (text, conv) => {
    if (text.charCodeAt(0) === ONE && text.charCodeAt(3) === ONE) out.push(conv);
  });
  return out;
}

/** The stored totals, categories with a count of 0 left out (as the Redis engine returns them). */
export function totalsOf(user: MemoryUser): StoredUserState['totals'] {
  const c = user.categories;
  const categories = new Map<string, number>();
  if (typeof c === 'number' && c !== 0) categories.set(DEFAULT_CATEGORY, c);
  if (typeof c === 'object') for (const [k, n] of c) if (n !== 0) categories.set(k, n);
  return { total: user.total, mentions: user.mentions, categories };
}

/** Replaces the stored totals (a rebuild from the records). */
export function setTotals(user: MemoryUser, totals: StoredUserState['totals']): void {
  user.total = totals.total;
  user.mentions = totals.mentions;
  user.categories = undefined;
  for (const [k, n] of totals.categories) addToCategory(user, k, n);
}

const DEFAULT_CATEGORY = 'default';

export function addToCategory(user: MemoryUser, category: string, delta: number): void {
  const c = user.categories;
  if (typeof c === 'object') {
    c.set(category, (c.get(category) ?? 0) + delta);
  } else if (category === DEFAULT_CATEGORY) {
    user.categories = (c ?? 0) + delta;
  } else {
    // The first other category: from now on a Map, the default category's count first if it had one.
    const map = new Map<string, number>();
    if (c !== undefined) map.set(DEFAULT_CATEGORY, c);
    map.set(category, delta);
    user.categories = map;
  }
}

export function memberTag(members: TextTable, uid: string): MemberTag | undefined {
  const text = tableGet(members, uid);
  return text === undefined ? undefined : decodeMemberTag(uid, text);
}

export function memberTags(members: TextTable): MemberTag[] {
  return tableEntries(members).map(([uid, text]) => decodeMemberTag(uid, text));
}

/** Same length as the Redis engine's epochs. */
export function newEpoch(): string {
  return nanoid(12);
}

export function info(conv: string, c: MemoryConversation): ConvInfo {
  return {
    conv,
    maxSeq: c.maxSeq,
    large: c.large,
    category: c.category,
    memberCount: tableSize(c.members),
    gen: c.gen,
    ...(c.lastAt > 0 ? { at: c.lastAt } : {}),
  };
}
