import { Packr } from 'msgpackr';
import type { ConvState } from '../../../protocol/types.js';
import type { StoredConv } from '../rules.js';

/**
 * Records, entries and snapshots are packed by Lua's cmsgpack (exact for integers, unlike cjson).
 * cmsgpack writes integers above 2^32 as int64, which msgpackr would turn into BigInt by default.
 */
const packr = new Packr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });

/** A script reply, as ioredis returns it from the Buffer variant of a command. */
export type Reply = Buffer | number | null | Reply[];

type Packed = Record<string, unknown>;

function unpackMap(buf: Buffer): Packed {
  const value: unknown = packr.unpack(buf);
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('malformed packed record');
  return value as Packed;
}

function num(v: unknown): number {
  if (typeof v !== 'number') throw new Error(`malformed packed number: ${String(v)}`);
  return v;
}

function stateFrom(m: Packed): ConvState {
  return {
    conv: String(m.conv),
    lastSeq: num(m.lastSeq),
    readSeq: num(m.readSeq),
    mentions: num(m.mentions),
    muted: m.muted === true,
    markedUnread: m.markedUnread === true,
    category: String(m.category),
    large: m.large === true,
    deletedSeq: num(m.deletedSeq),
  };
}

/** An empty buffer stands for "no state" (the user left the conversation). */
export function decodeState(buf: Buffer): ConvState | null {
  return buf.length === 0 ? null : stateFrom(unpackMap(buf));
}

export function decodeSnapshotConvs(buf: Buffer): ConvState[] {
  if (buf.length === 0) return [];
  const value: unknown = packr.unpack(buf);
  // cmsgpack packs an empty Lua table as an empty array, but be lenient with an empty map.
  if (!value || typeof value !== 'object') throw new Error('malformed packed snapshot');
  const list: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return list.map((m) => stateFrom(m as Packed));
}

export function decodeRecord(buf: Buffer): StoredConv {
  const m = unpackMap(buf);
  const seqs = Array.isArray(m.mentionSeqs) ? m.mentionSeqs : [];
  return {
    conv: String(m.conv),
    member: m.member === true,
    lastSeq: num(m.lastSeq),
    readSeq: num(m.readSeq),
    mentionSeqs: seqs.map(num),
    muted: m.muted === true,
    markedUnread: m.markedUnread === true,
    category: String(m.category),
    large: m.large === true,
    deletedSeq: num(m.deletedSeq),
  };
}

export function asBuffer(r: Reply | undefined): Buffer {
  if (Buffer.isBuffer(r)) return r;
  throw new Error(`unexpected script reply: expected a string, got ${typeof r}`);
}

export function asNumber(r: Reply | undefined): number {
  if (typeof r === 'number') return r;
  throw new Error(`unexpected script reply: expected an integer, got ${typeof r}`);
}

export function asArray(r: Reply | undefined): Reply[] {
  if (Array.isArray(r)) return r;
  throw new Error(`unexpected script reply: expected an array, got ${typeof r}`);
}

export function asStrings(r: Reply | undefined): string[] {
  return asArray(r).map((x) => asBuffer(x).toString());
}
