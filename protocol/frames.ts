import { type Static, Type } from '@sinclair/typebox';
import type { AuthCheck } from './errors.js';
import { LIMITS } from './limits.js';
import { ConvRef, Id, Level, ReadGen, ReadSeq, Seq, UnreadFromBody, UserSettingsBody } from './schemas.js';
import type { ConvState, PullReply } from './types.js';

/**
 * WebSocket frames. Binary frames carry MessagePack, text frames JSON; the server answers in the
 * format of the client's `hello`. Every frame is a map with a type tag `t`.
 */

const CursorSchema = Type.Object(
  { epoch: Type.String({ maxLength: 32 }), version: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }) },
  { additionalProperties: false },
);

/** Client request ids: echoed in the reply so a client can match acks (any small integer). */
const RequestId = Type.Integer({ minimum: 0, maximum: LIMITS.requestIdMax });

export const HelloFrame = Type.Object(
  {
    t: Type.Literal('hello'),
    token: Type.String({ minLength: 1, maxLength: 4096 }),
    cursor: Type.Optional(CursorSchema),
    device: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);

export const PullFrame = Type.Object(
  {
    t: Type.Literal('pull'),
    id: RequestId,
    since: Type.Optional(CursorSchema),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIMITS.pullPageMax })),
  },
  { additionalProperties: false },
);

export const ReadFrame = Type.Object(
  {
    t: Type.Literal('read'),
    id: RequestId,
    /** `[conv, seq]`, or `[conv, seq, gen]`: the read generation the read was made in (POST /v1/users/:uid/read's `gen`). */
    reads: Type.Array(Type.Union([Type.Tuple([ConvRef, ReadSeq]), Type.Tuple([ConvRef, ReadSeq, ReadGen])]), { minItems: 1, maxItems: LIMITS.readsPerBatch }),
  },
  { additionalProperties: false },
);

/** "Unread from here": as POST /v1/users/:uid/conversations/:conv/unread-from; answered with an ack. */
export const UnreadFromFrame = Type.Object(
  {
    t: Type.Literal('unread-from'),
    id: RequestId,
    conv: ConvRef,
    seq: UnreadFromBody.properties.seq,
    gen: UnreadFromBody.properties.gen,
  },
  { additionalProperties: false },
);

export const SettingsFrame = Type.Object(
  {
    t: Type.Literal('settings'),
    id: RequestId,
    conv: ConvRef,
    muted: Type.Optional(Type.Boolean()),
    markedUnread: Type.Optional(Type.Boolean()),
    /** The notification level (issue 43), as the settings endpoint's `level`. */
    level: Type.Optional(Level),
    /** Delete the conversation for this user (it comes back with the next message). */
    deleted: Type.Optional(Type.Literal(true)),
  },
  { additionalProperties: false, minProperties: 4 },
);

/**
 * Follow (or, with `unfollow: true`, unfollow) the thread off message `root` of `conv`
 * (PROTOCOL.md "Threads"): as PUT / DELETE /v1/users/:uid/conversations/:conv/threads/:root;
 * answered with an ack.
 */
export const FollowFrame = Type.Object(
  {
    t: Type.Literal('follow'),
    id: RequestId,
    conv: Id,
    root: Seq,
    unfollow: Type.Optional(Type.Literal(true)),
  },
  { additionalProperties: false },
);

/**
 * The user's own settings, as PUT /v1/users/:uid/settings (either field or both); answered with
 * an ack naming the user's position after it (a `mutedMentions` change starts the stream over
 * under a new epoch: PROTOCOL.md "Notification levels").
 */
export const UserSettingsFrame = Type.Object(
  {
    t: Type.Literal('user-settings'),
    id: RequestId,
    shareReads: UserSettingsBody.properties.shareReads,
    mutedMentions: UserSettingsBody.properties.mutedMentions,
  },
  { additionalProperties: false, minProperties: 3 },
);

/** A new token for the socket's user, sent before the current one expires (the socket is closed 4003 at its expiry). */
export const RefreshFrame = Type.Object(
  {
    t: Type.Literal('refresh'),
    id: RequestId,
    token: Type.String({ minLength: 1, maxLength: 4096 }),
  },
  { additionalProperties: false },
);

export type HelloFrame = Static<typeof HelloFrame>;
export type PullFrame = Static<typeof PullFrame>;
export type ReadFrame = Static<typeof ReadFrame>;
export type SettingsFrame = Static<typeof SettingsFrame>;
export type UnreadFromFrame = Static<typeof UnreadFromFrame>;
export type RefreshFrame = Static<typeof RefreshFrame>;
export type FollowFrame = Static<typeof FollowFrame>;
export type UserSettingsFrame = Static<typeof UserSettingsFrame>;
export type ClientFrame = HelloFrame | PullFrame | ReadFrame | SettingsFrame | RefreshFrame | UnreadFromFrame | FollowFrame | UserSettingsFrame;

/** Schemas by tag, so an error names the field of the frame the client meant to send. */
export const CLIENT_FRAME_SCHEMAS = {
  hello: HelloFrame,
  pull: PullFrame,
  read: ReadFrame,
  settings: SettingsFrame,
  refresh: RefreshFrame,
  'unread-from': UnreadFromFrame,
  follow: FollowFrame,
  'user-settings': UserSettingsFrame,
} as const;

export interface WelcomeFrame {
  t: 'welcome';
  uid: string;
  connId: string;
  /** Seconds between the server's `version` frames (the safety net). */
  versionEvery: number;
  /**
   * Milliseconds, counted from when the server sent this frame, until the socket is closed 4003
   * because its token expired (`exp` plus the server's clock tolerance): refresh before then.
   */
  expiresInMs: number;
}

/** The reply to `refresh`: the socket now runs on the new token, until `expiresInMs` from now. */
export interface RefreshedFrame {
  t: 'refreshed';
  id: number;
  expiresInMs: number;
}

/** A page of the user's stream (reply to hello or pull). */
export interface SyncFrame extends PullReply {
  t: 'sync';
  id?: number;
}

/**
 * A first part of a large snapshot (PROTOCOL.md "Snapshots in parts"): the `convs` of every part
 * with this `id` (none: the hello's sync), in order, come before the `snapshot.convs` of the
 * `sync` frame with the same `id` that completes the reply. Nothing is applied before that sync.
 */
export interface SyncPartFrame {
  t: 'sync-part';
  id?: number;
  epoch: string;
  /** The snapshot's version (the same in every part and in the completing sync). */
  v: number;
  convs: ConvState[];
}

/** One change of the user's stream, pushed: apply it only if `v` is the next expected version. */
export interface ChangeFrame {
  t: 'change';
  epoch: string;
  v: number;
  conv: string;
  /** null: the user left the conversation. */
  state: ConvState | null;
}

/** A read-diffused conversation's new head: `<conv, lastSeq>`, no version (it is not in the user's stream). */
export interface HeadFrame {
  t: 'head';
  conv: string;
  lastSeq: number;
  /** What the message(s) behind it add (PROTOCOL.md "Read-diffused groups"): max-merge into `headAt[conv]`. */
  headAt?: number;
  /** @all seqs to add to `mentionAll[conv]` (a union). */
  mentionAll?: number[];
  /** Non-counting seqs to add to `nocount[conv]` (a union). */
  nocount?: number[];
}

/**
 * Read receipts (PROTOCOL.md "Read receipts"): others' read positions in `conv` changed. `reads`:
 * the other sharing members' positions (uid → seq); a one-to-one chat's holds the peer's. Sent
 * only for conversations of at most RECEIPTS_DETAIL_MEMBERS members that are write-diffused
 * (larger ones: ask `GET .../reads`), only to members who share reads. No version: not part of
 * the user's stream. At most one per conversation per RECEIPTS_PUSH_INTERVAL_MS, the latest.
 */
export interface ReadsFrame {
  t: 'reads';
  conv: string;
  /** The conversation's member count: 2 is a one-to-one chat (its `reads` holds the peer's position, or nothing). */
  members: number;
  reads: Record<string, number>;
}

/** The safety net: the server's current cursor; a client behind it pulls. */
export interface VersionFrame {
  t: 'version';
  epoch: string;
  version: number;
}

export interface AckFrame {
  t: 'ack';
  id: number;
  epoch: string;
  /** The user's version after the request (the highest version the request produced). */
  version: number;
  /** Conversations the request could not apply (not a member / unknown). */
  rejected?: Array<{ conv: string; code: string }>;
}

export interface ErrorFrame {
  t: 'error';
  id?: number;
  code: string;
  message: string;
  /** With `unauthorized` / `token_expired` (a refused hello or refresh): the credential check that failed. */
  check?: AuthCheck;
  /** With `rate_limited`: milliseconds to wait before sending the request again. */
  retryAfterMs?: number;
}

export type ServerFrame =
  | WelcomeFrame
  | SyncFrame
  | SyncPartFrame
  | ChangeFrame
  | HeadFrame
  | ReadsFrame
  | VersionFrame
  | AckFrame
  | RefreshedFrame
  | ErrorFrame;

/** Close codes live in their own module so clients can import them without the schema library. */
export { CLOSE_CODES, type CloseReason } from './close-codes.js';
