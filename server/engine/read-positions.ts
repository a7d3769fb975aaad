import type { ReadsChange } from './notifications.js';

/**
 * Read receipts' store (issue 44): per conversation, each sharing member's read position ("has
 * seen up to") as a max-register, and per user the privacy setting `shareReads`. Kept apart from
 * the user records: a peer's read is never part of a user's versioned stream, so it never bumps a
 * version, an unread count or a badge.
 *
 * What is atomic with what: each conversation's registers are one step (`raise`, `drop`, `read`
 * of one conversation); the setting is one step on its user. Nothing spans the two: the caller
 * (server/sync/receipts.ts) orders them so that every interleaving ends right (see there).
 */
export interface ReadPositions {
  /**
   * Raises each `uid`'s position in `conv` to `seq` (max: a lower or equal seq changes nothing),
   * in the same step as checking that `uid` is a member (a non-member's changes nothing: a raise
   * racing a leave cannot put back what the leave's `drop` removed). Returns, per item, whether
   * it rose. Items of different conversations are separate steps.
   */
  raise(items: readonly ReadPosition[]): Promise<boolean[]>;
  /** Removes `uid`'s position from each conversation (sharing turned off, or the user left). */
  drop(uid: string, convs: readonly string[]): Promise<void>;
  /**
   * Each conversation's member count, mode and registers (every recorded position), read in one
   * step per conversation. A conversation that does not exist is left out.
   */
  read(convs: readonly string[], detail: ReadDetail): Promise<Map<string, ConvReads>>;
  /**
   * For each of `convs` with exactly 2 members (a one-to-one chat), the other member's position
   * (when recorded): what GET /unread and a pull show as the peer's. Read per conversation, in as
   * few calls as the store allows.
   */
  peers(uid: string, convs: readonly string[]): Promise<Map<string, number>>;
  /** Per user: false when they turned sharing off (default true). */
  sharing(uids: readonly string[]): Promise<boolean[]>;
  /** Stores the setting (the default, true, may be stored as nothing). */
  setSharing(uid: string, share: boolean): Promise<void>;
  /**
   * The user's setting `mutedMentions` (issue 43; default false): kept here beside `shareReads`,
   * the other per-user setting. Not part of the user's stream: SyncService moves the stream when
   * it changes, and the engine's pull and userState read it in the same step as the stream
   * (StoredUserState.mutedMentions); this read is for when they could not (sync-service.ts
   * setMutedMentions) and for GET /settings.
   */
  mutedMentions(uid: string): Promise<boolean>;
  setMutedMentions(uid: string, on: boolean): Promise<void>;
  /** Hands each change to the processes following its user (`NotificationHandler.readsChanged`); at most once, like every push. */
  announce(changes: readonly ReadsChange[]): Promise<void>;
}

export type { ReadsChange } from './notifications.js';

export interface ReadPosition {
  conv: string;
  uid: string;
  seq: number;
}

/**
 * What `read` returns besides each conversation's member count and mode: `upTo` (≥ 2): its
 * positions when it has at most that many members and is write-diffused (a one-to-one chat's peer:
 * 2; "read by whom": the documented group size), else none; `seqs`: per seq, how many recorded
 * positions are at or above it; `member`: whether that user is a member.
 */
export interface ReadDetail {
  upTo: number;
  seqs?: readonly number[];
  member?: string;
}

export interface ConvReads {
  memberCount: number;
  large: boolean;
  maxSeq: number;
  /** uid → position; empty unless the conversation is within `upTo`. */
  positions: Map<string, number>;
  /** Per `seqs` entry, in order. */
  counts: number[];
  /** Whether `member` is a member (false when not asked). */
  member: boolean;
  /** `member`'s own recorded position (null: none, or not asked). */
  own: number | null;
}
