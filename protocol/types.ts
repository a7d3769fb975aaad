/**
 * The state a user has of one conversation, exactly as the store keeps it and the sync stream
 * replays it. Every field is absolute (not a delta), so applying an entry twice is harmless.
 */
export interface ConvState {
  conv: string;
  /**
   * Highest message seq delivered to this user. For a read-diffused (`large`) conversation this
   * is only a lower bound: the conversation's head (`PullReply.heads`) is authoritative.
   */
  lastSeq: number;
  /** Highest seq this user has read on any device. Only ever raised. */
  readSeq: number;
  /** Number of distinct seqs above `readSeq` that @-mention this user. */
  mentions: number;
  muted: boolean;
  markedUnread: boolean;
  category: string;
  /** Read diffusion: `lastSeq` comes from the conversation head, not from this record. */
  large: boolean;
  /**
   * The user deleted the conversation when its last seq was `deletedSeq`; it stays hidden while
   * the effective lastSeq is <= deletedSeq and reappears with the next message. -1: never deleted.
   */
  deletedSeq: number;
}

/** One change in a user's sync stream: the conversation's whole state after it. */
export interface ConvEntry {
  v: number;
  /** `null` state: the user left the conversation; drop it. */
  conv: string;
  state: ConvState | null;
}

/** All of a user's conversations as of version `v`. */
export interface Snapshot {
  v: number;
  convs: ConvState[];
}

/** A sync cursor: the version a client has applied, in the stream history named by `epoch`. */
export interface Cursor {
  epoch: string;
  version: number;
}

export interface PullReply {
  epoch: string;
  /**
   * Present when the cursor could not be continued (first sync, another epoch, trimmed history,
   * or far behind): the client replaces ALL its state with it before applying `entries`.
   */
  snapshot?: Snapshot;
  /** Changes after the cursor (or after the snapshot), in version order. */
  entries: ConvEntry[];
  /** The version the client has reached once it applied this reply. */
  version: number;
  /** More entries follow: pull again with `since = version`. */
  more: boolean;
  /** Current head (maxSeq) of each read-diffused conversation the user is in. */
  heads: Record<string, number>;
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
}

export interface UnreadSummary {
  uid: string;
  epoch: string;
  version: number;
  /** Sum of `unread` over conversations that are not muted (deleted ones are not listed). */
  total: number;
  /** Sum of `mentions` over the same conversations. */
  mentions: number;
  /** `total`, split by category. Categories with zero unread may be omitted. */
  categories: Record<string, number>;
  conversations: ConvView[];
}

/** An ingest event from the message service. */
export interface MessageEvent {
  conv: string;
  seq: number;
  sender: string;
  /** Users @-mentioned by this message. */
  mentions?: string[];
}
