import type { ConvState as ProtocolConvState, ConvView as ProtocolConvView } from '../../../protocol/types.js';

/**
 * The protocol's state and view types (protocol/types.ts derives them from the reply schemas in
 * protocol/replies.ts), restated as plain interfaces for the published declarations: the
 * package's users need no schema library to read them. The check below fails to compile the
 * moment they differ from the protocol's.
 */

/** A user's state of one conversation; every field absolute, not a delta (PROTOCOL.md, "Shapes"). */
export interface ConvState {
  conv: string;
  /** A child row (PROTOCOL.md "Topics"): the conversation it belongs to; absent on a conversation's own row. */
  parent?: string;
  /** A topic's row: the topic (`conv` is then `<parent>#t:<topic>`). */
  topic?: string;
  /** A thread's row (PROTOCOL.md "Threads"): the seq of its root message in `parent` (`conv` is then `<parent>#r:<root>`). */
  thread?: number;
  /** Highest seq delivered to this user; for a read-diffused (`large`) conversation only a lower bound. */
  lastSeq: number;
  /** Highest seq this user has read on any device. Raised by reads; set back only by "unread from here" (a new `readGen`). */
  readSeq: number;
  /** The read position's generation, raised by each "unread from here" (absent: 0). Reads carry the one they were made in. */
  readGen?: number;
  /** Distinct seqs above `readSeq` that @-mention this user. */
  mentions: number;
  muted: boolean;
  markedUnread: boolean;
  category: string;
  /** Read diffusion: the effective lastSeq comes from the conversation's head. */
  large: boolean;
  /** Seqs in (readSeq, lastSeq] that do not count (non-counting messages, recalls); absent: 0. */
  nocount?: number;
  /** Hidden while the effective lastSeq is <= deletedSeq; -1: never deleted. */
  deletedSeq: number;
  /** Notification level 'mentions' (only its @-mentions count in the totals); absent: 'none' when muted, else 'all'. */
  level?: 'mentions';
  /** Last activity: the newest message-service timestamp (ms); absent: unknown. */
  at?: number;
}

/** A conversation as a UI shows it: effective lastSeq, unread derived. */
export interface ConvView {
  conv: string;
  /** A child row (PROTOCOL.md "Topics"): the conversation it belongs to; absent on a conversation's own row. */
  parent?: string;
  /** A topic's row: the topic (`conv` is then `<parent>#t:<topic>`). */
  topic?: string;
  /** A thread's row (PROTOCOL.md "Threads"): the seq of its root message in `parent` (`conv` is then `<parent>#r:<root>`). */
  thread?: number;
  lastSeq: number;
  readSeq: number;
  unread: number;
  mentions: number;
  muted: boolean;
  markedUnread: boolean;
  category: string;
  level?: 'mentions';
  /** Last activity (ms): for a read-diffused conversation the larger of its state's and the conversation's. */
  at?: number;
  /**
   * A conversation's row: the sums over the user's followed, unmuted thread rows of it, present
   * when either is above 0 (PROTOCOL.md "Threads"). A display figure: the totals count each
   * thread's row on its own.
   */
  threads?: { unread: number; mentions: number };
}

export type { Cursor } from '../../../protocol/types.js';

type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type MustBeTrue<T extends true> = T;
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, never used as a value
type SameAsProtocol = MustBeTrue<Exactly<ConvState, ProtocolConvState> | Exactly<ConvView, ProtocolConvView>>;
/**
 * Assignability passes over a missing optional field, so the fields are compared by name too.
 * The only difference: the view's `peerReadSeq` (the SDK serves receipts through `peerRead()`).
 */
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, never used as a value
type SameFields = MustBeTrue<
  | Exactly<Exclude<keyof ConvState, keyof ProtocolConvState>, never>
  | Exactly<Exclude<keyof ProtocolConvState, keyof ConvState>, never>
  | Exactly<Exclude<keyof ConvView, keyof ProtocolConvView>, never>
  | Exactly<Exclude<keyof ProtocolConvView, keyof ConvView>, 'peerReadSeq'>
>;
