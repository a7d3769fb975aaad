import type { ConvState, Cursor, ConvEntry, Snapshot } from '../../protocol/types.js';

/**
 * The store behind Redpoint, shaped by the domain (apply a message, a read, pull since a cursor),
 * not by Redis. Two implementations, `memory` and `redis`, pass one conformance suite.
 *
 * Atomicity contract:
 * - every conversation-level method is atomic on that conversation;
 * - every `UserOp` is atomic on that user: the conversation record, the stored totals, the
 *   version (+1 exactly when something changed, never otherwise) and the stream entry (plus a
 *   snapshot every `snapshotEvery` entries, and trimming at a snapshot boundary) change together.
 *   Ops on different users are independent and may be applied in any order.
 */
export interface Engine {
  readonly kind: EngineKind;

  /** Create the conversation if needed; `category`, when given, replaces the stored one. */
  ensureConversation(conv: string, category?: string): Promise<ConvInfo>;
  getConversation(conv: string): Promise<ConvInfo | null>;
  /**
   * Raise the conversation's maxSeq to `seq` (max-merge). Returns null for an unknown
   * conversation (nothing is created). For a write-diffused conversation also returns its
   * members, read in the same atomic step.
   */
  recordMessage(conv: string, seq: number): Promise<RecordedMessage | null>;
  /** Add/remove members; returns the member count after the change. */
  changeMembers(conv: string, add: readonly string[], remove: readonly string[]): Promise<number>;
  members(conv: string): Promise<string[]>;
  setConversationMode(conv: string, large: boolean): Promise<void>;
  /** Current maxSeq of each conversation (missing ones are left out). */
  heads(convs: readonly string[]): Promise<Record<string, number>>;

  /** Apply per-user ops; independent users are pipelined in one round trip where the store allows. */
  applyUserOps(ops: readonly UserOp[]): Promise<UserOpResult[]>;
  /** The user's changes after `since`, or the newest snapshot and what follows it. */
  pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull>;
  /** The user's current cursor (creates the stream's epoch if the user has none yet). */
  position(uid: string): Promise<Cursor>;
  /** Every conversation the user is a member of, with the stored totals (write-diffused part). */
  userState(uid: string): Promise<StoredUserState>;

  /** True when the store answers and is ready to take writes. */
  ready(): Promise<boolean>;
  close(): Promise<void>;
}

export type EngineKind = 'memory' | 'redis';

export interface EngineOptions {
  /** A snapshot entry every this many entries (at least as many as the user has conversations). */
  snapshotEvery: number;
  /** Stream history kept, in entries; trimmed only at a snapshot boundary. */
  streamMaxLen: number;
}

export interface ConvInfo {
  conv: string;
  maxSeq: number;
  large: boolean;
  category: string;
  memberCount: number;
}

export interface RecordedMessage {
  info: ConvInfo;
  /** Present only for write-diffused conversations. */
  members?: string[];
}

/**
 * One atomic change to one user's state of one conversation. Ops on a user who is not a
 * member of the conversation change nothing (except `join`) and report `member: false`.
 */
export type UserOp =
  | {
      /** Messages up to `lastSeq` were delivered; the user sent up to `readSeq`; `mentionSeqs` mention them. */
      type: 'message';
      uid: string;
      conv: string;
      lastSeq: number;
      readSeq: number;
      mentionSeqs: readonly number[];
    }
  | { type: 'read'; uid: string; conv: string; seq: number }
  /** `head`: the conversation's maxSeq now; older messages are not unread for a new member. */
  | { type: 'join'; uid: string; conv: string; head: number; category: string; large: boolean }
  | { type: 'leave'; uid: string; conv: string }
  /** Hide the conversation up to `head` (the larger of its maxSeq and the user's lastSeq). */
  | { type: 'delete'; uid: string; conv: string; head: number }
  | { type: 'settings'; uid: string; conv: string; muted?: boolean; markedUnread?: boolean }
  /** Switch diffusion mode; `head` is the conversation's maxSeq at the switch. */
  | { type: 'mode'; uid: string; conv: string; large: boolean; head: number }
  | { type: 'category'; uid: string; conv: string; category: string };

export type UserOpType = UserOp['type'];

export interface UserOpResult {
  /** False when the op was a no-op (a duplicate, an older seq, or the user is not a member). */
  changed: boolean;
  member: boolean;
  epoch: string;
  /** The user's version after the op. */
  version: number;
  /** The conversation's state after the op (null when the user is not a member). */
  state: ConvState | null;
}

export interface StoredPull {
  epoch: string;
  snapshot?: Snapshot;
  entries: ConvEntry[];
  version: number;
  more: boolean;
  /** Read-diffused conversations the user is a member of (their heads are fetched separately). */
  largeConvs: string[];
}

export interface StoredUserState {
  epoch: string;
  version: number;
  states: ConvState[];
  /** Stored totals over write-diffused, visible, unmuted conversations. */
  totals: { total: number; mentions: number; categories: Record<string, number> };
}
