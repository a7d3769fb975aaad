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
}

export type { Cursor } from '../../../protocol/types.js';

type Exactly<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type MustBeTrue<T extends true> = T;
// biome-ignore lint/correctness/noUnusedVariables: a compile-time check, never used as a value
type SameAsProtocol = MustBeTrue<Exactly<ConvState, ProtocolConvState> | Exactly<ConvView, ProtocolConvView>>;
