import { withChildFields } from '../../protocol/child-id.js';
import type { ConvEntry, ConvState } from '../../protocol/types.js';
import type { MemberTag } from './engine.js';
import { countsMentionsOnly, type StoredConv, storedLevel } from './rules.js';

/**
 * The stored state's text formats, shared by both engines: the Redis engine's Lua scripts store
 * and return them (redis/lua/user_apply.lua writes them, the other scripts read them), and the
 * memory engine keeps its streams and snapshots in them. Positional, `|`-separated: ids and categories never contain `|`, `,`, `;`
 * or a newline (ID_PATTERN), numbers are decimal integers. Short values keep Redis hashes and
 * lists in their compact listpack encoding, and cost Lua a `string.match` instead of a
 * MessagePack map.
 *
 * - record (hash field = conv): `<member><muted><marked><large>|lastSeq|readSeq|deletedSeq|gen|joinGen|category|mentionSeq,...`,
 *   then `|readGen|readMentionSeq,...` only when readGen > 0 or a spent mention is kept (so most
 *   records, and a plain message's cost, are as before the read register had a generation),
 *   then `|at` (last activity, ms) only when at > 0 (the read extension then written even when
 *   default: `|0|`), then `|nocountSeq,...` only when some (issue 43; `at` then written even when 0)
 * - state (stream entry, snapshot line, notification line): `conv|<muted><marked><large>|lastSeq|readSeq|mentions|deletedSeq|category`,
 *   then `|readGen` only when readGen > 0, then `|at` only when at > 0 (readGen then written even
 *   when 0), then `|nocount` only when above 0 (readGen and at then written even when 0); an entry for a conversation the user left is the bare `conv`
 * - the `<muted>` flag character, in records and states, is the notification level: '0' all,
 *   '1' none (muted), '2' mentions only
 * - snapshot: states joined by `\n`
 * - member tag (conversation hash field = uid, conv_members.lua): `joinGen|joinHead`
 * The default category is stored as '' (no category is empty).
 *
 * In the memory engine one string per entry is one object for V8's garbage collector to mark
 * instead of three, and holds no pointers.
 */

const bit = (s: string, i: number): boolean => s.charCodeAt(i) === 49; // '1'
/** The level character's "mentions only" ('2'); '1' there is muted (bit). */
const mentionsOnlyAt = (s: string, i: number): boolean => s.charCodeAt(i) === 50;

const DEFAULT_CATEGORY = 'default';
const categoryOf = (text: string | undefined): string => (text === undefined || text === '' ? DEFAULT_CATEGORY : text);

function int(text: string | undefined): number {
  const n = Number(text);
  if (text === undefined || text === '' || !Number.isSafeInteger(n)) throw new Error(`malformed stored number: ${String(text)}`);
  return n;
}

const seqList = (text: string | undefined): number[] => (text === undefined || text === '' ? [] : text.split(',').map(int));

export function decodeRecord(conv: string, text: string): StoredConv {
  const p = text.split('|');
  // 8 fields, or 10 with the read register's extension (readGen, spent mentions), 11 with `at`.
  if (p.length !== 8 && p.length !== 10 && p.length !== 11 && p.length !== 12) throw new Error(`malformed stored record of ${conv}`);
  const flags = p[0] ?? '';
  return {
    conv,
    member: bit(flags, 0),
    muted: bit(flags, 1),
    markedUnread: bit(flags, 2),
    large: bit(flags, 3),
    lastSeq: int(p[1]),
    readSeq: int(p[2]),
    deletedSeq: int(p[3]),
    gen: int(p[4]),
    joinGen: int(p[5]),
    category: categoryOf(p[6]),
    mentionSeqs: seqList(p[7]),
    readGen: p.length >= 10 ? int(p[8]) : 0,
    readMentionSeqs: seqList(p[9]),
    mentionsOnly: mentionsOnlyAt(flags, 1),
    at: p.length >= 11 ? int(p[10]) : 0,
    nocountSeqs: seqList(p[11]),
  };
}

/** `<member><muted><marked><large>` by the bits member 8, muted 4, marked 2, large 1; +16: mentions only ('2' for muted). */
const RECORD_FLAG_TEXT = Array.from({ length: 32 }, (_, n) => [8, 4, 2, 1].map((b) => (b === 4 && n >= 16 ? '2' : (n & b) !== 0 ? '1' : '0')).join(''));

/** Inverse of decodeRecord (the tests write records by hand to corrupt a store). */
export function encodeRecord(rec: StoredConv): string {
  const flags = (rec.member ? 8 : 0) + (rec.muted ? 4 : rec.mentionsOnly ? 16 : 0) + (rec.markedUnread ? 2 : 0) + (rec.large ? 1 : 0);
  // join() makes one flat string (the memory engine keeps records as these texts); a template
  // literal this long would be a tree of ConsStrings (see encodeEntryText).
  const fields = [
    RECORD_FLAG_TEXT[flags],
    rec.lastSeq,
    rec.readSeq,
    rec.deletedSeq,
    rec.gen,
    rec.joinGen,
    rec.category === DEFAULT_CATEGORY ? '' : rec.category,
    rec.mentionSeqs.join(','),
  ];
  const nocount = rec.nocountSeqs.length > 0;
  if (rec.readGen > 0 || rec.readMentionSeqs.length > 0 || rec.at > 0 || nocount) fields.push(rec.readGen, rec.readMentionSeqs.join(','));
  if (rec.at > 0 || nocount) fields.push(rec.at);
  if (nocount) fields.push(rec.nocountSeqs.join(','));
  return fields.join('|');
}

/** `<muted><marked><large>` by the bits muted 4, marked 2, large 1; 8 + marked/large: mentions only ('2'). */
const FLAG_TEXT = ['000', '001', '010', '011', '100', '101', '110', '111', '200', '201', '210', '211'];

/** A stream entry's text (stateText in user_apply.lua): the conversation's state, or the bare `conv` when the user left it. */
export function encodeEntryText(conv: string, state: ConvState | null): string {
  if (!state) return conv;
  // The level character is the stored bit (rules.ts mentionsOnly: relative to the row's default level).
  const flags = (state.muted ? 4 : storedLevel(conv, state.level ?? 'all').mentionsOnly ? 8 : 0) + (state.markedUnread ? 2 : 0) + (state.large ? 1 : 0);
  // join() makes one flat string; a template literal this long would be a tree of ConsStrings
  // (several heap objects with pointers), which is what a kept entry must not be.
  const fields = [
    conv,
    FLAG_TEXT[flags],
    state.lastSeq,
    state.readSeq,
    state.mentions,
    state.deletedSeq,
    state.category === DEFAULT_CATEGORY ? '' : state.category,
  ];
  const hasAt = state.at !== undefined && state.at > 0;
  const hasNocount = state.nocount !== undefined && state.nocount > 0;
  if ((state.readGen !== undefined && state.readGen > 0) || hasAt || hasNocount) fields.push(state.readGen ?? 0);
  if (hasAt || hasNocount) fields.push(state.at ?? 0);
  if (hasNocount) fields.push(state.nocount ?? 0);
  return fields.join('|');
}

/** A member tag's text (join(): one flat string, as the memory engine keeps it). */
export function encodeMemberTag(tag: { joinGen: number; joinHead: number }): string {
  return [tag.joinGen, tag.joinHead].join('|');
}

export function decodeMemberTag(uid: string, text: string): MemberTag {
  const bar = text.indexOf('|');
  return { uid, joinGen: Number(text.slice(0, bar)), joinHead: Number(text.slice(bar + 1)) };
}

/** A snapshot's text: the states, one per line (inverse of decodeSnapshotText). */
export function encodeSnapshotText(states: readonly ConvState[]): string {
  return states.map((s) => encodeEntryText(s.conv, s)).join('\n');
}

/** A stream entry's conversation and state (null: the user left it). */
export function decodeEntryText(text: string): { conv: string; state: ConvState | null } {
  const bar = text.indexOf('|');
  if (bar < 0) return { conv: text, state: null };
  const p = text.split('|');
  if (p.length < 7 || p.length > 10) throw new Error('malformed stored entry');
  const conv = p[0] ?? '';
  const flags = p[1] ?? '';
  const state: ConvState = {
    conv,
    lastSeq: int(p[2]),
    readSeq: int(p[3]),
    mentions: int(p[4]),
    muted: bit(flags, 0),
    markedUnread: bit(flags, 1),
    category: categoryOf(p[6]),
    large: bit(flags, 2),
    deletedSeq: int(p[5]),
  };
  if (p.length >= 8) {
    const readGen = int(p[7]);
    if (readGen > 0) state.readGen = readGen;
  }
  if (countsMentionsOnly({ conv, muted: state.muted, mentionsOnly: mentionsOnlyAt(flags, 0) })) state.level = 'mentions';
  if (p.length >= 9) {
    const at = int(p[8]);
    if (at > 0) state.at = at;
  }
  if (p.length === 10) state.nocount = int(p[9]);
  withChildFields(state);
  return { conv, state };
}

export function decodeState(text: string): ConvState | null {
  return text === '' ? null : decodeEntryText(text).state;
}

export function decodeSnapshotText(text: string): ConvState[] {
  if (text === '') return [];
  const out: ConvState[] = [];
  for (const line of text.split('\n')) {
    const { state } = decodeEntryText(line);
    if (state) out.push(state);
  }
  return out;
}

/** Entries stored at list positions `first`, `first + 1`, ...: their versions follow from the position. */
export function decodeEntries(texts: readonly string[], firstVersion: number): ConvEntry[] {
  return texts.map((t, i) => ({ v: firstVersion + i, ...decodeEntryText(t) }));
}

const BAR = 124; // '|'
const COMMA = 44; // ','
const MINUS = 45; // '-'
const ZERO = 48; // '0'

/** Where readInt stopped: one past the separator after the number it read. */
let cursor = 0;

/**
 * The decimal integer at `at` in `text`, ended by `stop` or the end of the text; NaN unless it is
 * one (digits, an optional leading '-', a safe integer). No substring: nothing to allocate.
 */
function readInt(text: string, at: number, stop: number): number {
  let i = at;
  const negative = text.charCodeAt(i) === MINUS;
  if (negative) i++;
  const first = i;
  let n = 0;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === stop) break;
    const d = c - ZERO;
    if (d < 0 || d > 9) return Number.NaN;
    n = n * 10 + d;
  }
  cursor = i + 1;
  // "-0" is decodeRecord's -0: left to it.
  if (i === first || !Number.isSafeInteger(n) || (negative && n === 0)) return Number.NaN;
  return negative ? 0 - n : n;
}

/**
 * decodeRecord without split(): the memory engine decodes a record for every op it applies, and
 * split's array and nine substrings per record were most of what an op allocated. The same result
 * as decodeRecord for every text it accepts; anything else goes to decodeRecord, which throws.
 */
export function decodeRecordFast(conv: string, text: string): StoredConv {
  const lastSeq = readInt(text, 5, BAR);
  const readSeq = readInt(text, cursor, BAR);
  const deletedSeq = readInt(text, cursor, BAR);
  const gen = readInt(text, cursor, BAR);
  const joinGen = readInt(text, cursor, BAR);
  const categoryAt = cursor;
  const categoryEnd = text.indexOf('|', categoryAt);
  const mentionSeqs: number[] = [];
  // Exactly 8 fields, 4 flag characters, no empty mention seq at the end ("5," is not one). A
  // record with the read register's extension (10 fields, rare) is decodeRecord's.
  let ok = text.indexOf('|') === 4 && categoryEnd >= 0 && text.indexOf('|', categoryEnd + 1) < 0 && text.charCodeAt(text.length - 1) !== COMMA;
  for (let at = categoryEnd + 1; ok && at < text.length; at = cursor) {
    const seq = readInt(text, at, COMMA);
    mentionSeqs.push(seq);
    ok = !Number.isNaN(seq);
  }
  if (!ok || Number.isNaN(lastSeq + readSeq + deletedSeq + gen + joinGen)) return decodeRecord(conv, text);
  return {
    conv,
    member: bit(text, 0),
    muted: bit(text, 1),
    markedUnread: bit(text, 2),
    large: bit(text, 3),
    lastSeq,
    readSeq,
    deletedSeq,
    gen,
    joinGen,
    category: categoryEnd === categoryAt ? DEFAULT_CATEGORY : text.slice(categoryAt, categoryEnd),
    mentionSeqs,
    readGen: 0,
    readMentionSeqs: [],
    mentionsOnly: mentionsOnlyAt(text, 1),
    at: 0,
    nocountSeqs: [],
  };
}
