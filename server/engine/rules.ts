import { isThreadConv, withChildFields } from '../../protocol/child-id.js';
import { LIMITS } from '../../protocol/limits.js';
import type { ConvState, NotificationLevel } from '../../protocol/types.js';
import type { UserOp } from './ops.js';

/**
 * The per-user state rules, as pure functions. The memory engine runs them directly; the Redis
 * engine's `user_apply.lua` is a line-by-line port, and the conformance suite keeps them equal.
 *
 * Every number is a max-register (lastSeq, readSeq, deletedSeq, gen): applying an op twice, or
 * two ops in either order, gives the same record. deletedSeq is one within a membership: a new
 * join (joinGen) starts it over at -1, so whatever merges records (PostgreSQL, a restore) orders
 * it by joinGen first. Flags are last-writer-wins user settings.
 *
 * Membership is a register ordered by the conversation's generation (`gen`): a membership op
 * carries the user's whole conversation-level state as of one generation, and only an op of the
 * record's generation or a newer one applies. So a join and a leave made by two processes land
 * right in either order, and a mode switch cannot be undone by an older op arriving late.
 *
 * A record can exist without membership: a left member's record, or a **pending** one — the
 * conversation step listed the user as a member (it was added) but its membership op has not
 * landed yet. Message ops raise a pending record silently (no version, no stream entry, no
 * totals); the membership op that lands later counts them. That closes the race between a join
 * and a message flushed by another process in between.
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
  /** Generation of the newest membership op applied (0: none yet). */
  gen: number;
  /** Generation at which the current (or last) membership began: a different one is a new membership. */
  joinGen: number;
  /**
   * The read register's generation: the read position is the pair (readGen, readSeq), a
   * max-register compared lexicographically. A read raises readSeq within a generation; the
   * user's "unread from here" raises the generation and sets readSeq (which may go down).
   */
  readGen: number;
  /**
   * Seqs at or below readSeq that mention the user, ascending, the newest
   * `LIMITS.mentionSeqsPerConversation`: the mentions a read spent, kept so that an "unread from
   * here" below them counts them again (mentionSeqs holds only those above readSeq).
   */
  readMentionSeqs: number[];
  /**
   * Notification level (issue 43), with `muted`: the stored bit "the other level than the row's
   * default" between `all` and `mentions` (defaultLevel: `mentions` for a thread's row, `all`
   * for every other). So on a plain or topic row it means "mentions only", on a thread's row
   * "all" set by the user: the two levels of a thread's row stay distinct from its default,
   * with no new stored field. Never with muted (settings set them together; levelOf and
   * countsMentionsOnly read them, the Lua and state-text port the same reading).
   */
  mentionsOnly: boolean;
  /** Last activity: the largest message-service timestamp (`at`, ms) of a message delivered here; 0 = unknown. A max-register. */
  at: number;
  /**
   * Seqs that do not count (issue 43: a `counts: false` message, or a recalled one), ascending,
   * distinct, the newest `LIMITS.nocountSeqsPerConversation`. A grow-only set (order-insensitive,
   * idempotent; a recall may land before its message), not trimmed by reads: the lowest go first
   * at the cap, and those are the read ones, so an "unread from here" finds them again.
   */
  nocountSeqs: number[];
}

/** How many of the record's non-counting seqs lie in (readSeq, lastSeq]: what its unread leaves out. */
function nocountAbove(rec: { lastSeq: number; readSeq: number; nocountSeqs: readonly number[] }): number {
  let n = 0;
  for (const s of rec.nocountSeqs) if (s > rec.readSeq && s <= rec.lastSeq) n++;
  return n;
}

/** Issue 43's unread: (lastSeq − readSeq) − the non-counting seqs in (readSeq, lastSeq]. */
function unreadOf(rec: StoredConv): number {
  return Math.max(0, rec.lastSeq - rec.readSeq - nocountAbove(rec));
}

/**
 * A row's level until its user sets one (PROTOCOL.md "Threads"): a thread's row starts at
 * `mentions` (listed with its unread, only its mentions in the totals), every other row at `all`.
 */
function defaultLevel(conv: string): NotificationLevel {
  return isThreadConv(conv) ? 'mentions' : 'all';
}

/** Whether the row adds only its mentions to the totals (level `mentions`, set or by default). */
export function countsMentionsOnly(rec: { conv: string; muted: boolean; mentionsOnly: boolean }): boolean {
  return !rec.muted && rec.mentionsOnly !== (defaultLevel(rec.conv) === 'mentions');
}

export function levelOf(rec: { conv: string; muted: boolean; mentionsOnly: boolean }): NotificationLevel {
  return rec.muted ? 'none' : countsMentionsOnly(rec) ? 'mentions' : 'all';
}

/** The stored bits of `level` on `conv`'s row (StoredConv.mentionsOnly: relative to defaultLevel). */
export function storedLevel(conv: string, level: NotificationLevel): { muted: boolean; mentionsOnly: boolean } {
  if (level === 'none') return { muted: true, mentionsOnly: false };
  return { muted: false, mentionsOnly: level !== defaultLevel(conv) };
}

export interface Contribution {
  unread: number;
  mentions: number;
  category: string;
}

const NONE: Contribution = { unread: 0, mentions: 0, category: '' };

/** What this conversation adds to the user's stored totals (read-diffused ones are summed at read time). */
export function contribution(rec: StoredConv | undefined): Contribution {
  if (!rec?.member || rec.large || rec.muted || rec.lastSeq <= rec.deletedSeq) return NONE;
  // Mentions only: each unread mention is one unread of the badge, the rest is listed, not counted.
  if (countsMentionsOnly(rec)) return { unread: rec.mentionSeqs.length, mentions: rec.mentionSeqs.length, category: rec.category };
  return { unread: unreadOf(rec), mentions: rec.mentionSeqs.length, category: rec.category };
}

export function toConvState(rec: StoredConv): ConvState {
  const state: ConvState = {
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
  // Shown only once the user has marked something unread: generation 0 is the default.
  if (rec.readGen > 0) state.readGen = rec.readGen;
  // Issue 43's fields, shown only when not the default (a plain or muted state is as before):
  // the level 'none' is `muted`, 'all' is neither.
  if (countsMentionsOnly(rec)) state.level = 'mentions';
  if (rec.at > 0) state.at = rec.at;
  const nocount = nocountAbove(rec);
  if (nocount > 0) state.nocount = nocount;
  withChildFields(state);
  return state;
}

/** What clients see of a record: its state while a member, else nothing. */
export function visibleState(rec: StoredConv | undefined): ConvState | null {
  return rec?.member ? toConvState(rec) : null;
}

function blankRecord(conv: string): StoredConv {
  return {
    conv,
    member: false,
    lastSeq: 0,
    readSeq: 0,
    mentionSeqs: [],
    muted: false,
    markedUnread: false,
    category: 'default',
    large: false,
    deletedSeq: -1,
    gen: 0,
    joinGen: 0,
    readGen: 0,
    readMentionSeqs: [],
    mentionsOnly: false,
    at: 0,
    nocountSeqs: [],
  };
}

/** Keeps the seqs above readSeq, distinct and ascending, the newest `cap`. */
export function mergeMentions(
  current: readonly number[],
  added: readonly number[],
  readSeq: number,
  cap: number = LIMITS.mentionSeqsPerConversation,
): number[] {
  const merged = new Set<number>();
  for (const seq of current) if (seq > readSeq) merged.add(seq);
  for (const seq of added) if (seq > readSeq) merged.add(seq);
  const sorted = [...merged].sort((a, b) => a - b);
  return sorted.length > cap ? sorted.slice(sorted.length - cap) : sorted;
}

/** The newest `cap` of `seqs` (ascending). */
function newest(seqs: number[], cap: number = LIMITS.mentionSeqsPerConversation): number[] {
  return seqs.length > cap ? seqs.slice(seqs.length - cap) : seqs;
}

/**
 * Raise readSeq; a read that moves it also clears the "marked unread" dot, and the mentions it
 * spent move to readMentionSeqs (an "unread from here" may count them again).
 */
function raiseRead(rec: StoredConv, seq: number): void {
  if (seq <= rec.readSeq) return;
  rec.readSeq = seq;
  rec.markedUnread = false;
  if (rec.mentionSeqs.length === 0) return;
  const spent = rec.mentionSeqs.filter((m) => m <= seq);
  if (spent.length === 0) return;
  rec.mentionSeqs = rec.mentionSeqs.filter((m) => m > seq);
  rec.readMentionSeqs = newest([...rec.readMentionSeqs, ...spent]);
}

/**
 * The read register set to (gen, seq): an "unread from here", or a read of a newer generation
 * than the record's. readSeq never goes below deletedSeq (what the user deleted stays read) nor
 * below 0; the mentions above the new readSeq count again, those at or below it are spent. The
 * "marked unread" dot is cleared: the position now says exactly what is unread.
 */
function setRead(rec: StoredConv, gen: number, seq: number): void {
  const target = Math.max(seq, rec.deletedSeq, 0);
  const all = [...rec.readMentionSeqs, ...rec.mentionSeqs];
  rec.readGen = gen;
  rec.readSeq = target;
  rec.markedUnread = false;
  rec.mentionSeqs = all.filter((m) => m > target);
  rec.readMentionSeqs = newest(all.filter((m) => m <= target));
}

/**
 * The read register's merge with (gen, seq), lexicographic: a newer generation sets it, the same
 * one raises readSeq, an older one changes nothing. `gen` absent: the record's own generation.
 */
function mergeRead(rec: StoredConv, gen: number | undefined, seq: number): void {
  if (gen === undefined || gen === rec.readGen) raiseRead(rec, seq);
  else if (gen > rec.readGen) setRead(rec, gen, seq);
}

function copy(rec: StoredConv): StoredConv {
  return { ...rec, mentionSeqs: [...rec.mentionSeqs], readMentionSeqs: [...rec.readMentionSeqs], nocountSeqs: [...rec.nocountSeqs] };
}

/**
 * What a read-diffused conversation's head push carries for the messages of one flush (issue 43,
 * PROTOCOL.md "Read-diffused groups"): their newest `at`, their @all seqs above the head the
 * conversation had when it became read-diffused (one at or below it was a write-diffused message
 * and is not kept), and the seqs that stop counting. The push goes out when the head rose or any
 * of them is there (a late recall moves no head). conv_record.lua applies the same rule; the
 * conformance suite holds both engines to the same frames. Undefined: the messages carry none.
 */
export function headPushExtras(
  item: { at?: number; mentionAll?: readonly number[]; nocount?: readonly number[] },
  largeFrom: number,
): { headAt?: number; mentionAll?: number[]; nocount?: number[] } | undefined {
  // Most messages carry none of them: nothing is made for those (the memory engine's hot path).
  if (item.at === undefined && !item.mentionAll?.length && !item.nocount?.length) return undefined;
  const all = (item.mentionAll ?? []).filter((seq) => seq > largeFrom);
  const nocount = item.nocount ?? [];
  // An @all at or below the floor alone adds nothing: no push for it (conv_record.lua's allCounted '').
  if (item.at === undefined && all.length === 0 && nocount.length === 0) return undefined;
  return {
    ...(item.at !== undefined ? { headAt: item.at } : {}),
    ...(all.length > 0 ? { mentionAll: [...new Set(all)].sort((a, b) => a - b) } : {}),
    ...(nocount.length > 0 ? { nocount: [...new Set(nocount)].sort((a, b) => a - b) } : {}),
  };
}

/** The union, distinct and ascending, the newest `LIMITS.nocountSeqsPerConversation`. */
export function mergeNocount(current: readonly number[], added: readonly number[]): number[] {
  const sorted = [...new Set([...current, ...added])].sort((a, b) => a - b);
  const cap = LIMITS.nocountSeqsPerConversation;
  return sorted.length > cap ? sorted.slice(sorted.length - cap) : sorted;
}

/** Non-counting or recalled seqs join the record's set; their mentions go, spent ones too (never counted again). */
function addNocount(rec: StoredConv, seqs: readonly number[]): void {
  rec.nocountSeqs = mergeNocount(rec.nocountSeqs, seqs);
  const gone = new Set(rec.nocountSeqs);
  rec.mentionSeqs = rec.mentionSeqs.filter((m) => !gone.has(m));
  rec.readMentionSeqs = rec.readMentionSeqs.filter((m) => !gone.has(m));
}

/**
 * The rebase of one record to `head` (the operator lowered the conversation's head to it): every
 * message up to `head` counts as delivered (lastSeq set to it, not max-merged: the one place a
 * record's lastSeq goes down), nothing read, deleted or mentioned lies above it.
 */
function lowerTo(rec: StoredConv, head: number): void {
  rec.lastSeq = head;
  rec.readSeq = Math.min(rec.readSeq, head);
  rec.deletedSeq = Math.min(rec.deletedSeq, head);
  rec.mentionSeqs = rec.mentionSeqs.filter((m) => m > rec.readSeq && m <= head);
  rec.readMentionSeqs = rec.readMentionSeqs.filter((m) => m <= head);
  // Seqs above the lowered head will be other messages.
  rec.nocountSeqs = rec.nocountSeqs.filter((s) => s <= head);
}

/** Returns the record after `op` (a new object, or `before` itself when the op does not apply). */
export function applyRule(before: StoredConv | undefined, op: UserOp): StoredConv | undefined {
  switch (op.type) {
    case 'message': {
      // Made before this membership began (a rejoin or a rebase since): its join covered it, and
      // a rebase must not see the old head come back.
      if (before?.member && op.gen !== undefined && op.gen < before.joinGen) return before;
      // The conversation step listed this user as a member: a pending record keeps the raise.
      const rec = before ? copy(before) : blankRecord(op.conv);
      rec.lastSeq = Math.max(rec.lastSeq, op.lastSeq);
      raiseRead(rec, op.readSeq);
      if (op.nocountSeqs !== undefined && op.nocountSeqs.length > 0) addNocount(rec, op.nocountSeqs);
      const added = rec.nocountSeqs.length === 0 ? op.mentionSeqs : op.mentionSeqs.filter((m) => !rec.nocountSeqs.includes(m));
      rec.mentionSeqs = mergeMentions(rec.mentionSeqs, added, rec.readSeq);
      if (op.at !== undefined && op.at > rec.at) rec.at = op.at;
      return rec;
    }
    case 'read': {
      if (!before?.member) return before;
      const rec = copy(before);
      mergeRead(rec, op.gen, op.seq);
      return rec;
    }
    case 'unread-from': {
      // Made in another membership than the record's (a rejoin in between): its floor is not this one's.
      if (!before?.member || (op.joinGen !== undefined && op.joinGen !== before.joinGen)) return before;
      const rec = copy(before);
      // Without a generation: the record's next one, taken in this step (see ops.ts).
      mergeRead(rec, op.gen ?? rec.readGen + 1, Math.max(op.seq - 1, op.floor ?? 0));
      return rec;
    }
    case 'membership': {
      if (before && op.gen < before.gen) return before;
      const rec = before ? copy(before) : blankRecord(op.conv);
      rec.gen = op.gen;
      if (op.member) {
        if (!rec.member || rec.joinGen !== op.joinGen) {
          // A new membership: nothing before its join head is unread; muted is kept. A rebase
          // keeps a member's own positions, only lowered (a pending record joins first).
          if (!rec.member || !op.rebase) {
            rec.member = true;
            raiseRead(rec, op.joinHead);
            rec.mentionSeqs = rec.mentionSeqs.filter((m) => m > rec.readSeq);
            // An earlier membership's spent mentions never count again.
            rec.readMentionSeqs = [];
            rec.markedUnread = false;
            rec.deletedSeq = -1;
          }
          rec.joinGen = op.joinGen;
          if (op.rebase) lowerTo(rec, op.head);
        }
        rec.lastSeq = Math.max(rec.lastSeq, op.head);
        if (op.at !== undefined && op.at > rec.at) rec.at = op.at;
        if (op.nocountSeqs !== undefined && op.nocountSeqs.length > 0) addNocount(rec, op.nocountSeqs);
        rec.large = op.large;
        rec.category = op.category;
      } else if (rec.member) {
        rec.member = false;
        rec.mentionSeqs = [];
        rec.readMentionSeqs = [];
        rec.nocountSeqs = [];
        rec.markedUnread = false;
      }
      return rec;
    }
    case 'settings': {
      if (!before?.member) return before;
      const rec = copy(before);
      if (op.deleteAt !== undefined) {
        const head = Math.max(op.deleteAt, rec.lastSeq);
        raiseRead(rec, head);
        rec.deletedSeq = Math.max(rec.deletedSeq, head);
        rec.markedUnread = false;
        // At or below deletedSeq: below the floor of any "unread from here".
        rec.readMentionSeqs = [];
        rec.nocountSeqs = rec.nocountSeqs.filter((s) => s > rec.deletedSeq);
      }
      // The level wins over muted when both are given (the HTTP layer refuses a contradiction).
      if (op.level !== undefined) {
        const bits = storedLevel(rec.conv, op.level);
        rec.muted = bits.muted;
        rec.mentionsOnly = bits.mentionsOnly;
      } else if (op.muted !== undefined) {
        // Unmuting goes back to the row's default level (a thread's: mentions).
        rec.muted = op.muted;
        rec.mentionsOnly = false;
      }
      if (op.markedUnread !== undefined) rec.markedUnread = op.markedUnread;
      return rec;
    }
  }
}

/** What the conversation cap's claim answers for one user joining one conversation (Engine.claimJoins). */
export const CLAIM_OUTCOMES = ['member', 'claimed', 'full'] as const;
export type ClaimOutcome = (typeof CLAIM_OUTCOMES)[number];

/**
 * MAX_CONVERSATIONS_PER_USER's decision for a user joining a conversation, made in one step on
 * the user (user_claim.lua's twin of the same name): a current member is never refused; a join
 * already claimed keeps its claim (a retry, or another call adding the same user to the same
 * conversation); otherwise the join is claimed while `held` — the conversations the user is a
 * member of plus the live claims of other joins — is below `cap`, else refused.
 */
export function claimOutcome(member: boolean, claimed: boolean, held: number, cap: number): ClaimOutcome {
  if (member) return 'member';
  if (claimed || held < cap) return 'claimed';
  return 'full';
}

/**
 * Whether a join claim still holds a place (user_claim.lua's twin of the same name): until its
 * deadline, and only while no membership op of its conversation has landed on the user's record
 * since it was taken (`gen`: the record's generation then, 0 for none). Its own join moves the
 * generation (the member count has the join from then on), and so does a newer op that won over
 * it: either way the claim is spent.
 */
export function claimLive(claim: { deadline: number; gen: number }, recordGen: number, now: number): boolean {
  return now < claim.deadline && recordGen === claim.gen;
}

export function sameState(a: ConvState | null, b: ConvState | null): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return (
    a.lastSeq === b.lastSeq &&
    a.readSeq === b.readSeq &&
    a.mentions === b.mentions &&
    a.muted === b.muted &&
    a.markedUnread === b.markedUnread &&
    a.category === b.category &&
    a.large === b.large &&
    a.deletedSeq === b.deletedSeq &&
    (a.readGen ?? 0) === (b.readGen ?? 0) &&
    a.level === b.level &&
    (a.at ?? 0) === (b.at ?? 0) &&
    (a.nocount ?? 0) === (b.nocount ?? 0)
  );
}

function sameSeqs(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((seq, i) => seq === b[i]);
}

/** Every stored field equal (a record that differs only in what clients do not see is still rewritten). */
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
    a.gen === b.gen &&
    a.joinGen === b.joinGen &&
    a.readGen === b.readGen &&
    a.mentionsOnly === b.mentionsOnly &&
    a.at === b.at &&
    sameSeqs(a.mentionSeqs, b.mentionSeqs) &&
    sameSeqs(a.readMentionSeqs, b.readMentionSeqs) &&
    sameSeqs(a.nocountSeqs, b.nocountSeqs)
  );
}

/**
 * Entries between two snapshots, and history kept: as many as the user has conversations (a
 * snapshot costs about one entry per conversation, so it stays amortized O(1) per entry), at
 * least `snapshotEvery`, at most `streamMaxLen`. A cursor further behind than this gets a snapshot
 * anyway, so keeping more history would only cost memory.
 */
export function snapshotInterval(snapshotEvery: number, streamMaxLen: number, conversations: number): number {
  return Math.min(streamMaxLen, Math.max(snapshotEvery, conversations));
}

export interface StreamPosition {
  epoch: string;
  version: number;
  /** Entries with v <= base are trimmed; a cursor below it cannot be continued. */
  base: number;
  /** Version of the newest snapshot, 0 when there is none (the empty state at version 0). */
  snapshotVersion: number;
  /** The user's snapshot interval now (snapshotInterval). */
  interval: number;
}

/**
 * Whether a pull from `since` must start over from the snapshot instead of continuing with deltas.
 * An empty cursor epoch is a wildcard (a bare `since=N` typed by a person); clients send theirs.
 */
export function needsReset(pos: StreamPosition, since: { epoch: string; version: number } | null): boolean {
  if (!since || (since.epoch !== '' && since.epoch !== pos.epoch)) return true;
  if (since.version > pos.version || since.version < pos.base) return true;
  return pos.snapshotVersion > since.version && pos.version - since.version > pos.interval;
}

/**
 * The base after appending up to `version`: history older than one interval goes, in steps of a
 * quarter interval (so the store trims now and then, not at every entry), never past the snapshot.
 * The stream thus holds one to 1.25 intervals of entries.
 */
export function trimmedBase(base: number, version: number, snapshotVersion: number, interval: number): number {
  if (version - base <= interval + Math.max(1, Math.floor(interval / 4))) return base;
  return Math.min(snapshotVersion, Math.max(base, version - interval));
}
