import type { Static } from '@sinclair/typebox';
import type { ConvEntrySchema, ConvStateSchema, ConvViewSchema, PullReplySchema, SnapshotSchema, UnreadSummarySchema } from './replies.js';

/**
 * The shapes of replies and state, derived from their schemas in `replies.ts` (the one source,
 * also of the OpenAPI document). Type-only imports: nothing here loads the schema library.
 */

/**
 * The state a user has of one conversation, exactly as the store keeps it and the sync stream
 * replays it. Every field is absolute (not a delta), so applying an entry twice is harmless.
 */
export type ConvState = Static<typeof ConvStateSchema>;

/** One change in a user's sync stream: the conversation's whole state after it (`null`: the user left). */
export type ConvEntry = Static<typeof ConvEntrySchema>;

/** All of a user's conversations as of version `v`. */
export type Snapshot = Static<typeof SnapshotSchema>;

/** A sync cursor: the version a client has applied, in the stream history named by `epoch`. */
export interface Cursor {
  epoch: string;
  version: number;
}

/** A page of the user's stream; with `snapshot`, the client replaces ALL its state first. */
export type PullReply = Static<typeof PullReplySchema>;

/** A conversation as a UI shows it: effective lastSeq, unread derived. */
export type ConvView = Static<typeof ConvViewSchema>;

/** `GET /v1/users/:uid/unread`: totals over the visible, unmuted conversations, and the list. */
export type UnreadSummary = Static<typeof UnreadSummarySchema>;

/**
 * A conversation's notification level (PROTOCOL.md "Notification levels"): `all` counts its unread
 * in the totals, `mentions` only its @-mentions, `none` nothing (muted).
 */
export type NotificationLevel = 'all' | 'mentions' | 'none';

/** An ingest event from the message service. */
export interface MessageEvent {
  conv: string;
  /** The conversation's topic (absent: the conversation itself); its seq is in the topic's own seq space (PROTOCOL.md "Topics"). */
  topic?: string;
  /** A thread reply: the root message's seq in `conv`; its seq is in the thread's own seq space (PROTOCOL.md "Threads"). */
  thread?: number;
  /** A thread reply's root message's sender: made a follower (when a member of the conversation). */
  rootSender?: string;
  seq: number;
  sender: string;
  /** Users @-mentioned by this message. */
  mentions?: string[];
  /** @all / @here: a mention of every member but the sender. */
  mentionAll?: boolean;
  /** The message service's timestamp (ms since the Unix epoch): the conversation's last activity. */
  at?: number;
  /** `false`: an edit, reaction or notice: raises lastSeq and the activity, adds no unread, its mentions are ignored. */
  counts?: boolean;
  /** Seqs of this conversation recalled by this message: from now on they do not count, nor their mentions. */
  recalls?: number[];
}

/**
 * The epoch of a user the server has never seen (PROTOCOL.md, "When the reply starts over from a
 * snapshot"): stable, so asking about such a user creates nothing and a client of one is not told
 * to resync on every check; leaving it is a user's first history, not a reset. A real epoch is 12
 * random characters, never this.
 */
export const UNSEEN_EPOCH = '0';
