import { isChildConv, threadConv } from '../../../protocol/child-id.js';
import type { ClientFrame } from '../../../protocol/frames.js';
import { LIMITS } from '../../../protocol/limits.js';
import { AuthError } from './auth-error.js';
import { Backoff, DEFAULT_BACKOFF } from './backoff.js';
import { type CacheAdapter, validCachedState } from './cache/cache.js';
import { jsonCodec } from './codec.js';
import { Connection } from './connection.js';
import { Emitter } from './emitter.js';
import { watchLifecycle } from './lifecycle.js';
import { StatePublisher } from './publisher.js';
import { ReadBatcher } from './read-batcher.js';
import { ReceiptsView } from './receipts.js';
import { PushSequencer } from './sequencer.js';
import { SettingsQueue, USER_SETTINGS } from './settings-queue.js';
import { deriveState } from './state.js';
import { ConvStore, type SettingsChange } from './store.js';
import { SyncSession } from './sync.js';
import { realTimers, Timer } from './timers.js';
import { type WebSocketConstructor, webSocketTransport } from './transport.js';
import type { ClientOptions, ConversationView, RedpointEvents, RedpointState } from './types.js';

/**
 * The server sends a `version` frame about every WS_VERSION_EVERY_SECONDS (120 s by default) on
 * every connection: a heartbeat a little longer than that costs a healthy connection nothing,
 * and only a socket that stopped delivering gets the extra pull.
 */
const DEFAULT_HEARTBEAT_MS = 150_000;
/** Enough for a token source that served one stale token from a cache; few enough to stop a loop fast. */
const DEFAULT_MAX_AUTH_FAILURES = 3;

/**
 * Red dots that are never wrong: applies pushes strictly in version order, pulls on any gap, on
 * reconnect and when the page comes back, shows this device's reads at once (and never lets an
 * older server state bring a cleared dot back), and keeps the last known counts in a cache.
 */
export class RedpointClient {
  private readonly events = new Emitter<RedpointEvents>();
  private readonly store = new ConvStore();
  private readonly receipts = new ReceiptsView();
  private readonly pushes = new PushSequencer();
  private readonly connection: Connection;
  private readonly backoff: Backoff;
  private readonly reads: ReadBatcher;
  private readonly settingsQueue: SettingsQueue;
  private readonly session: SyncSession;
  private readonly publisher: StatePublisher;
  private readonly cache: CacheAdapter | undefined;
  private readonly saveTimer: Timer;
  private readonly cacheDebounceMs: number;
  private nextId = 1;
  private started = false;
  private stopped = false;
  private stopLifecycle: () => void = () => undefined;
  private lastCloseCode: number | undefined;

  constructor(private readonly options: ClientOptions) {
    const timers = options.timers ?? realTimers;
    const random = options.random ?? Math.random;
    this.cache = options.cache;
    const retryMs = options.retryMs ?? 1000;
    this.cacheDebounceMs = options.cacheDebounceMs ?? 200;
    const backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.backoff = new Backoff(backoff, random);
    const WebSocketClass = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WebSocketClass) throw new Error('RedpointClient: no WebSocket available; pass one (in Node 20: the `ws` package)');
    const codec = options.codec ?? jsonCodec;
    const direct = webSocketTransport(options.url, WebSocketClass, codec);
    const transport = options.transport ? options.transport({ url: options.url, WebSocket: WebSocketClass, codec, direct }) : direct;
    this.connection = new Connection(
      {
        transport,
        token: options.token,
        timers,
        backoff: this.backoff,
        requestTimeoutMs: options.requestTimeoutMs ?? 15_000,
        heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
        maxAuthFailures: Math.max(1, options.maxAuthFailures ?? DEFAULT_MAX_AUTH_FAILURES),
      },
      {
        hello: () => ({ ...(this.store.cursor ? { cursor: this.store.cursor } : {}), ...(options.device ? { device: options.device } : {}) }),
        welcomed: (welcome) => this.session.welcomed(welcome.uid),
        frame: (frame) => this.session.frame(frame),
        down: (_code, final) => {
          this.session.down();
          if (!final) return;
          // Giving up on the tokens is news the app must act on (sign the user in again).
          if (final instanceof AuthError) this.events.emit('error', final);
          this.publisher.fail(final);
        },
        state: (_state, code) => {
          this.lastCloseCode = code;
          this.changed();
        },
        error: (err) => this.events.emit('error', err),
        // A pull from the cursor: an empty page when nothing changed, and a missed reply is a dead socket.
        idle: () => this.session.pull(),
      },
    );
    this.reads = new ReadBatcher({
      timers,
      delayMs: options.readBatchMs ?? 500,
      maxBatch: options.readBatchSize ?? 20,
      retryMs,
      send: (reads) => this.request((id) => ({ t: 'read', id, reads })),
    });
    this.settingsQueue = new SettingsQueue({
      timers,
      retryMs,
      send: (conv, change) =>
        this.request((id) => {
          if ('follow' in change)
            return { t: 'follow', id, conv: change.follow.conv, root: change.follow.root, ...(change.unfollow ? { unfollow: true as const } : {}) };
          if ('unreadFrom' in change) return { t: 'unread-from', id, conv, seq: change.unreadFrom, gen: change.gen };
          if ('mutedMentions' in change) return { t: 'user-settings', id, mutedMentions: change.mutedMentions };
          return { t: 'settings', id, conv, ...change };
        }),
    });
    this.session = new SyncSession({
      store: this.store,
      receipts: this.receipts,
      receiptsChanged: (conv) => this.events.emit('receipts', { conv }),
      pushes: this.pushes,
      reads: this.reads,
      settings: this.settingsQueue,
      timers,
      // The contract is to pull within 500 ms of seeing a gap.
      gapWaitMs: Math.min(options.gapWaitMs ?? 300, 450),
      pullBackoff: new Backoff({ baseMs: retryMs, maxMs: Math.max(retryMs, backoff.maxMs) }, random),
      request: (frame) => this.request(frame),
      confirmed: () => this.backoff.reset(),
      reset: (event) => this.events.emit('reset', event),
      changed: () => this.changed(),
      error: (err) => this.events.emit('error', err),
    });
    this.saveTimer = new Timer(timers, () => void this.save());
    this.publisher = new StatePublisher({
      build: () => this.build(),
      change: (state) => this.events.emit('change', state),
      status: (event) => this.events.emit('status', event),
      closeCode: () => this.lastCloseCode,
    });
  }

  /**
   * The current picture: a new object only when something in it changed, so it is usable as a
   * React external store snapshot (`@redpoint/client/react` has the hooks).
   */
  get state(): RedpointState {
    return this.publisher.state;
  }

  /**
   * `change` fires at most once per microtask, after a burst of frames or calls has settled, and
   * never twice for the same picture; `status` when status, stale or connection changes;
   * `reset` when the server's state was reset (another epoch replaced what the client held).
   */
  on<K extends keyof RedpointEvents>(type: K, listener: (payload: RedpointEvents[K]) => void): () => void {
    return this.events.on(type, listener);
  }

  /** `useSyncExternalStore(client.subscribe, () => client.state)` */
  subscribe = (listener: () => void): (() => void) => this.events.on('change', listener);

  /**
   * Resolves on the first SYNCED state: every number shown is the server's, confirmed by a pull
   * on the current connection. Rejects with a `ClosedError` if the client closes for good before
   * that (a close code that says not to reconnect, such as 4002 unauthorized, or `stop()`).
   */
  ready(): Promise<void> {
    return this.publisher.ready();
  }

  conversation(conv: string): ConversationView | undefined {
    return this.state.conversations.find((c) => c.conv === conv);
  }

  /**
   * Read receipts: the peer's read position in the one-to-one conversation `conv` (show ✓✓ on your
   * own messages at or below it); undefined when unknown or when either of you does not share
   * reads. The `receipts` event fires when it (or `readBy`) changes.
   */
  peerRead(conv: string): number | undefined {
    return this.receipts.peerRead(conv);
  }

  /**
   * Read receipts: how many other members have read `seq` of `conv`, as pushed (`reads` frames:
   * conversations of at most RECEIPTS_DETAIL_MEMBERS members, 30 by default); for larger groups
   * ask the server: GET /v1/users/:uid/conversations/:conv/reads.
   */
  readBy(conv: string, seq: number): number {
    return this.receipts.readBy(conv, seq);
  }

  /** Newest message seq known for `conv`, hidden (deleted) conversations included; 0 if unknown. */
  lastSeq(conv: string): number {
    return this.store.lastSeq(conv);
  }

  /**
   * Loads the cache (its counts show at once, marked stale), then connects. Resolves once the
   * connection is under way, not when synced: `await client.ready()` for that.
   */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.cache) {
      try {
        // Checked here too: an adapter of the app's own may hand back what an older build saved.
        const cached = validCachedState(await this.cache.load());
        if (cached && !this.store.hasData) {
          this.store.restore(cached);
          for (const [conv, seq, gen] of cached.reads) this.reads.add(conv, seq, gen ?? this.store.readGen(conv));
        }
      } catch (err) {
        this.events.emit('error', err instanceof Error ? err : new Error(String(err)));
      }
    }
    if (this.options.lifecycle ?? true)
      this.stopLifecycle = watchLifecycle(
        () => this.refresh(),
        () => this.connection.reconnectNow(),
        () => this.connection.wentOffline(),
      );
    this.connection.start();
    this.changed();
  }

  /** Closes the socket and writes the cache. Reads not yet acknowledged stay in the cache. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopLifecycle();
    this.connection.stop();
    // The same teardown as a dropped socket (which connection.stop does not report), minus the reconnect.
    this.session.down();
    this.publisher.closed('client stopped', undefined);
    this.saveTimer.cancel();
    this.settingsQueue.rejectAll(new Error('client stopped'));
    await this.save();
  }

  /**
   * The user has read `conv` up to `seq` (default: its newest message). The dot clears at once;
   * the report is batched and sent again until the server acknowledges it.
   */
  markRead(conv: string, seq = this.store.lastSeq(conv)): void {
    const shown = this.store.effective(conv);
    if (!shown || seq > shown.readSeq) {
      // Made in the read generation shown: if another device's "unread from here" lands first, the server ignores it.
      const gen = shown?.readGen ?? 0;
      this.store.optimisticRead(conv, seq, gen);
      this.reads.add(conv, seq, gen);
    }
    // A read only clears "marked unread" on the server when it raises readSeq; make it explicit.
    if (shown?.markedUnread) void this.settings(conv, { markedUnread: false }).catch((err: Error) => this.events.emit('error', err));
    this.changed();
  }

  /** Sends queued reads now instead of at the end of the batch window. */
  flushReads(): void {
    this.reads.flush();
    this.changed();
  }

  mute(conv: string, muted = true): Promise<void> {
    return this.settings(conv, { muted });
  }

  /** The notification level (issue 43): 'all', 'mentions' (only @-mentions in the badge) or 'none' (muted). */
  setLevel(conv: string, level: 'all' | 'mentions' | 'none'): Promise<void> {
    return this.settings(conv, { level });
  }

  markUnread(conv: string, markedUnread = true): Promise<void> {
    return this.settings(conv, { markedUnread });
  }

  /**
   * "Unread from here": message `seq` and every one after it become unread on every device
   * (readSeq = seq − 1, never below where the conversation was deleted), and the mentions among
   * them count again. Shown at once; resolves once the server has it. Made in the next read
   * generation after the one shown, so a read another device made before seeing it cannot undo
   * it, and a repeat (a retry after a reconnect) is harmless.
   */
  markUnreadFrom(conv: string, seq: number): Promise<void> {
    if (!Number.isSafeInteger(seq) || seq < 1) return Promise.reject(new RangeError(`markUnreadFrom: seq must be an integer >= 1, got ${seq}`));
    // Reads queued before it must reach the server first (made in the older generation, they would be ignored anyway).
    this.reads.flush();
    const gen = this.store.readGen(conv) + 1;
    this.store.optimisticUnreadFrom(conv, seq, gen);
    const done = this.settingsQueue.submit(conv, { unreadFrom: seq, gen });
    this.changed();
    return done;
  }

  /** Hides the conversation until its next message. */
  deleteConversation(conv: string): Promise<void> {
    return this.settings(conv, { deleted: true });
  }

  /**
   * Follows the thread off message `root` of `conv` (PROTOCOL.md "Threads"): its row
   * (`<conv>#r:<root>`, `parent` and `thread`) arrives with the sync, at the thread's head now.
   * Resolves once the server has it (sent again after a reconnect until then); rejects when the
   * server refuses it (`not_a_member`, `limit_exceeded`: 200 threads per conversation).
   */
  follow(conv: string, root: number): Promise<void> {
    return this.followChange(conv, root, false);
  }

  /** Stops following the thread: its row goes (its reads with it). */
  unfollow(conv: string, root: number): Promise<void> {
    return this.followChange(conv, root, true);
  }

  private followChange(conv: string, root: number, unfollow: boolean): Promise<void> {
    if (!Number.isSafeInteger(root) || root < 1) return Promise.reject(new RangeError(`follow: root must be an integer >= 1, got ${root}`));
    if (isChildConv(conv)) return Promise.reject(new RangeError(`follow: ${conv} is a topic or a thread; threads hang off a conversation's messages`));
    // Queued under the thread's id: its ack or refusal touches no overlay of the conversation's.
    const done = this.settingsQueue.submit(threadConv(conv, root), { follow: { conv, root }, unfollow });
    this.changed();
    return done;
  }

  /**
   * The user's setting `mutedMentions` (PROTOCOL.md "Notification levels"): on, each unread
   * mention in a muted conversation counts in the badge. Resolves once the server has it (sent
   * again after a reconnect until then). Not shown ahead of the server: the server starts the
   * user's stream over, and every device, this one too, sums its totals with the setting of the
   * reply it pulls then (`state.mutedMentions`).
   */
  setMutedMentions(on: boolean): Promise<void> {
    const done = this.settingsQueue.submit(USER_SETTINGS, { mutedMentions: on });
    this.changed();
    return done;
  }

  /**
   * Connects again after the client gave up: `auth_failed` (fix what `token()` returns first: the
   * `AuthError` says which check failed), or a close code that said not to reconnect. Calls
   * `token()` afresh, with the count of refused hellos started over; `ready()` then waits for the
   * next sync. While offline (waiting to retry), does the same at once, skipping the backoff.
   * Does nothing before `start()` or after `stop()`.
   */
  reconnect(): void {
    if (!this.started || this.stopped) return;
    this.publisher.reopen();
    this.connection.restart();
  }

  /** Pulls now (e.g. on pull-to-refresh). */
  refresh(): void {
    if (this.connection.open) this.session.pull();
    else this.connection.reconnectNow();
  }

  private settings(conv: string, change: SettingsChange): Promise<void> {
    // Reads queued before this change must reach the server first: a later read would clear
    // a "marked unread" set after it.
    this.reads.flush();
    this.store.optimisticSettings(conv, change);
    const done = this.settingsQueue.submit(conv, change);
    this.changed();
    return done;
  }

  private request(frame: (id: number) => ClientFrame): number | null {
    const id = this.nextId;
    if (!this.connection.send({ ...frame(id), id })) return null;
    this.nextId = id + 1 >= LIMITS.requestIdMax ? 1 : id + 1;
    return id;
  }

  private build(): RedpointState {
    return deriveState({
      store: this.store,
      connection: this.connection.state,
      open: this.connection.open,
      confirmed: this.session.confirmed,
      pulling: this.session.pullId !== null,
      gap: this.session.gap,
      unacked: this.reads.pending + this.settingsQueue.pending,
    });
  }

  private changed(): void {
    if (!this.started) return;
    this.publisher.invalidate();
    if (this.store.hasData && this.cache) this.saveTimer.arm(this.cacheDebounceMs);
  }

  private async save(): Promise<void> {
    if (!this.cache || !this.store.hasData) return;
    try {
      await this.cache.save(this.store.toCache(this.reads.unacknowledged(), Date.now()));
    } catch (err) {
      this.events.emit('error', err instanceof Error ? err : new Error(String(err)));
    }
  }
}
