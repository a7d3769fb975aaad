import type { CacheAdapter } from './cache/cache.js';
import type { FrameCodec } from './codec.js';
import type { Timers } from './timers.js';
import type { TransportFactory, WebSocketConstructor } from './transport.js';
import type { ConvView, Cursor } from './wire-types.js';

/**
 * Where the numbers stand:
 * - NO_DATA: nothing known yet (never render 0 for this: render a placeholder);
 * - DIRTY: something is known but not confirmed: a version gap was seen or a pull is in flight,
 *   or the counts came from the cache and no pull has confirmed them yet;
 * - PENDING: confirmed, except for optimistic reads/settings still waiting for their ack;
 * - SYNCED: what the server has, as of the cursor.
 */
export type SyncStatus = 'NO_DATA' | 'SYNCED' | 'DIRTY' | 'PENDING';

/**
 * idle: not started; connecting: socket opening or hello sent; open: welcomed by the server;
 * offline: waiting to reconnect (backoff); closed: stopped, or the server said not to reconnect;
 * auth_failed: the server refused the tokens (`maxAuthFailures` hellos in a row, or one 4002),
 * nothing is retried until `reconnect()`.
 */
export type ConnectionState = 'idle' | 'connecting' | 'open' | 'offline' | 'closed' | 'auth_failed';

export interface Totals {
  /** Unread over unmuted, visible conversations: the badge. */
  total: number;
  mentions: number;
  /** `total` by category; categories with nothing unread are left out. */
  categories: Record<string, number>;
}

export interface ConversationView extends ConvView {
  /** An optimistic read or setting of this conversation waits for its ack. */
  pending: boolean;
}

/** One immutable picture of the client: a new object after every change. */
export interface RedpointState {
  status: SyncStatus;
  /**
   * The numbers may be out of date: they come from the cache or from before a disconnect, and no
   * pull on the current connection has confirmed them. Show them, marked as such.
   */
  stale: boolean;
  connection: ConnectionState;
  uid: string | null;
  cursor: Cursor | null;
  /** Visible conversations (deleted ones without newer messages are hidden), the newest last activity (`at`) first, then by id. */
  conversations: ConversationView[];
  /** null while NO_DATA: there is no number to show yet. */
  totals: Totals | null;
  /**
   * The user's setting `mutedMentions` (PROTOCOL.md "Notification levels"), as of the last sync
   * reply: on, a muted conversation's mentions count in `totals`. Pass it to `conversationGroups`
   * and `groupOf` so their `inBadge` sums the same way.
   */
  mutedMentions: boolean;
}

export interface StatusEvent {
  status: SyncStatus;
  stale: boolean;
  connection: ConnectionState;
  /** The close code that put the client offline or closed, when there was one. */
  closeCode?: number;
}

/**
 * The server's state for this user was reset: a sync reply of another epoch (the memory engine
 * restarted, Redis lost the user's keys, an operator rebuilt the stream, the user was erased)
 * replaced everything this client held. Not fired for a user's first history (from epoch `"0"`,
 * a user the server had never seen) nor when another user signs in.
 */
export interface ResetEvent {
  /** The cursor the client held, from its cache or its connection before. */
  from: Cursor;
  /** The cursor of the reply that replaced it; the next `change` carries its counts. */
  to: Cursor;
}

export interface RedpointEvents {
  change: RedpointState;
  status: StatusEvent;
  reset: ResetEvent;
  /** Something went wrong that the client recovers from by itself (cache I/O, an error frame). */
  error: Error;
  /** Read receipts of `conv` changed (`peerRead`, `readBy`). */
  receipts: { conv: string };
}

export interface BackoffOptions {
  /** First retry waits up to this long (full jitter: a uniform draw in [0, cap)). */
  baseMs: number;
  /** Cap of the exponential growth. */
  maxMs: number;
}

export interface ClientOptions {
  /** WebSocket endpoint, e.g. `wss://host/v1/ws`. */
  url: string;
  /**
   * Returns a JWT for the user. Called before each connection, ahead of the current token's
   * expiry (about a third of its remaining life before it, at most a minute: the new token goes
   * to the server in a `refresh` frame, the socket stays), and after the server says the token
   * expired (4003). Return a fresh token each time it is called ahead of expiry, or the socket
   * is closed when the old one runs out (then reconnects with the next one).
   */
  token: () => Promise<string>;
  /**
   * Hellos refused in a row for an expired token (4003) before the client gives up: state
   * `auth_failed`, an `AuthError` on `error` and from `ready()`, no more retries until
   * `reconnect()`. Default 3. A 4002 (a token the server will never take) gives up at once; a
   * network failure, a server down or a `token()` that throws never counts, and a welcome or a
   * `reconnect()` starts the count over.
   */
  maxAuthFailures?: number;
  /** Last known state across restarts; without one a start shows NO_DATA until the first sync. */
  cache?: CacheAdapter;
  /**
   * How frames are encoded: JSON text frames by default (readable in devtools); `msgpack` from
   * `@redpoint/client/msgpack` for MessagePack binary frames (smaller).
   */
  codec?: FrameCodec;
  /**
   * How the client reaches the server: its own WebSocket by default; `shareTabs({ key })` from
   * `@redpoint/client/tabs` makes the tabs of one browser share one socket through a leader tab.
   */
  transport?: TransportFactory;
  /** A WebSocket class; defaults to `globalThis.WebSocket` (browsers, Node >= 22). Node 20: pass `ws`. */
  WebSocket?: WebSocketConstructor;
  /** Sent in hello so the server can tell a user's devices apart in logs. */
  device?: string;
  /** Reconnect backoff; default 500 ms growing to 30 s. */
  backoff?: Partial<BackoffOptions>;
  /** How long an out-of-order push waits for the missing version before the client pulls. Default 300 ms. */
  gapWaitMs?: number;
  /** Read reports are sent after this delay or once `readBatchSize` conversations are queued. Default 500 ms. */
  readBatchMs?: number;
  /** Default 20. */
  readBatchSize?: number;
  /**
   * Delay before a request the server refused as `unavailable`/`rate_limited` is sent again.
   * Default 1 s; refused pulls back off from there (full jitter, up to `backoff.maxMs`).
   */
  retryMs?: number;
  /**
   * A request (pull, read, settings) or the hello not answered in this long means the connection
   * is broken: the client closes it (code 4000) and reconnects with the usual backoff; the hello
   * carries the cursor, so reconnecting is a pull. Default 15 s (the server answers within a few).
   */
  requestTimeoutMs?: number;
  /**
   * The heartbeat: when nothing arrived for this long on an open connection, the client pulls
   * from its cursor (an empty page when nothing changed). A dead socket, which a browser may show
   * as open for minutes, is then found within heartbeatMs + requestTimeoutMs. Default 150 s: the
   * server's own `version` frame (every WS_VERSION_EVERY_SECONDS, 120 s by default) keeps a
   * healthy connection from ever needing it. Lower it with that setting in mind; 0: off.
   */
  heartbeatMs?: number;
  /** Debounce of cache writes. Default 200 ms. */
  cacheDebounceMs?: number;
  /**
   * Pull when the page becomes visible, reconnect at once when the browser goes online, and drop
   * the connection at once (state `offline`) when it goes offline. Default true.
   */
  lifecycle?: boolean;
  /** Injected for tests; `Math.random` by default. */
  random?: () => number;
  /** Injected for tests; the global timers by default. */
  timers?: Timers;
}
