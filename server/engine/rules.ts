import { LIMITS } from '../../protocol/limits.js';
import type { ConvState } from '../../protocol/types.js';
import type { UserOp } from './engine.js';

/**
 * The per-user state rules, as pure functions. The memory engine runs them directly; the Redis
 * engine's `user_apply.lua` is a line-by-line port, and the conformance suite keeps them equal.
 *
 * Everything numeric is a max-register (lastSeq, readSeq, deletedSeq): applying an op twice, or
 * two ops in either order, gives the same record. Flags are last-writer-wins user settings.
 */
export interface StoredConv {
  conv: string;
  member: boolean;
  lastSeq: number;
  readSeq: number;
  /** Seqs above readSeq that mention the user, ascending, at most `LIMITS.mentionSeqsPerConversation`. */
  mentionSeqs: number[];
  muted: boolean;
  markedUnread: boolean;
  category: string;
  large: boolean;
  deletedSeq: number;
}

export interface Contribution {
  unread: number;
  mentions: number;
  category: string;
}

const NONE: Contribution = { unread: 0, mentions: 0, category: '' };

/** What this conversation adds to the user's stored totals (read-diffused ones are summed at read time). */
export function contribution(rec: StoredConv | undefined): Contribution {
  if (!rec || !rec.member || rec.large || rec.muted || rec.lastSeq <= rec.deletedSeq) return NONE;
  return { unread: Math.max(0, rec.lastSeq - rec.readSeq), mentions: rec.mentionSeqs.length, category: rec.category };
}

export function toConvState(rec: StoredConv): ConvState {
  return {
    conv: rec.conv,
    lastSeq: rec.lastSeq,
    readSeq: rec.readSeq,
    mentions: rec.mentionSeqs.length,
    muted: rec.muted,
    markedUnread: rec.markedUnread,
    category: rec.category,
    large: rec.large,
    deletedSeq: rec.deletedSeq,
  };
}

function mergeMentions(current: readonly number[], added: readonly number[], readSeq: number): number[] {
  const merged = new Set<number>();
  for (const seq of current) if (seq > readSeq) merged.add(seq);
  for (const seq of added) if (seq > readSeq) merged.add(seq);
  const sorted = [...merged].sort((a, b) => a - b);
  const cap = LIMITS.mentionSeqsPerConversation;
  return sorted.length > cap ? sorted.slice(sorted.length - cap) : sorted;
}

/** Raise readSeq; a read that moves it also clears the "marked unread" dot and spent mentions. */
function raiseRead(rec: StoredConv, seq: number): void {
  if (seq <= rec.readSeq) return;
  rec.readSeq = seq;
  rec.markedUnread = false;
  rec.mentionSeqs = rec.mentionSeqs.filter((m) => m > seq);
}

/** Returns the record after `op` (a new object), or `undefined` when the op does not apply. */
export function applyRule(before: StoredConv | undefined, op: UserOp): StoredConv | undefined {
  if (op.type === 'join') {
    if (before?.member) return before;
    return {
      conv: op.conv,
      member: true,
      lastSeq: Math.max(before?.lastSeq ?? 0, op.head),
      readSeq: Math.max(before?.readSeq ?? 0, op.head),
      mentionSeqs: [],
      muted: before?.muted ?? false,
      markedUnread: false,
      category: op.category,
      large: op.large,
      deletedSeq: -1,
    };
  }
  if (!before?.member) return before;
  const rec: StoredConv = { ...before, mentionSeqs: [...before.mentionSeqs] };
  switch (op.type) {
    case 'message':
      rec.lastSeq = Math.max(rec.lastSeq, op.lastSeq);
      raiseRead(rec, op.readSeq);
      rec.mentionSeqs = mergeMentions(rec.mentionSeqs, op.mentionSeqs, rec.readSeq);
      break;
    case 'read':
      raiseRead(rec, op.seq);
      break;
    case 'leave':
      rec.member = false;
      rec.mentionSeqs = [];
      rec.markedUnread = false;
      break;
    case 'delete': {
      const head = Math.max(op.head, rec.lastSeq);
      raiseRead(rec, head);
      rec.deletedSeq = Math.max(rec.deletedSeq, head);
      rec.markedUnread = false;
      break;
    }
    case 'settings':
      if (op.muted !== undefined) rec.muted = op.muted;
      if (op.markedUnread !== undefined) rec.markedUnread = op.markedUnread;
      break;
    case 'mode':
      rec.large = op.large;
      rec.lastSeq = Math.max(rec.lastSeq, op.head);
      break;
    case 'category':
      rec.category = op.category;
      break;
  }
  return rec;
}

export function sameRecord(a: StoredConv | undefined, b: StoredConv | undefined): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return (
    a.member === b.member &&
    a.lastSeq === b.lastSeq &&
    a.readSeq === b.readSeq &&
    a.muted === b.muted &&
    a.markedUnread === b.markedUnread &&
    a.category === b.category &&
    a.large === b.large &&
    a.deletedSeq === b.deletedSeq &&
    a.mentionSeqs.length === b.mentionSeqs.length &&
    a.mentionSeqs.every((seq, i) => seq === b.mentionSeqs[i])
  );
}

/** Entries between snapshots: at least `snapshotEvery`, and at least one per conversation. */
export function snapshotInterval(snapshotEvery: number, conversations: number): number {
  return Math.max(snapshotEvery, conversations);
}

export interface StreamPosition {
  epoch: string;
  version: number;
  /** Entries with v <= base are trimmed; a cursor below it cannot be continued. */
  base: number;
  /** Version of the newest stored snapshot, 0 when there is none. */
  latestSnapshot: number;
  conversations: number;
}

/**
 * Whether a pull from `since` must start over from a snapshot instead of continuing with deltas.
 * An empty cursor epoch is a wildcard (a bare `since=N` typed by a person); clients send theirs.
 */
export function needsReset(pos: StreamPosition, since: { epoch: string; version: number } | null, snapshotEvery: number): boolean {
  if (!since || (since.epoch !== '' && since.epoch !== pos.epoch)) return true;
  if (since.version > pos.version || since.version < pos.base) return true;
  const behind = pos.version - since.version;
  return pos.latestSnapshot > since.version && behind > snapshotInterval(snapshotEvery, pos.conversations);
}
