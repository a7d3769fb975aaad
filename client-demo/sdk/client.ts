import type { ErrorCode } from '../../protocol/errors.js';
import type { AckFrame, ChangeFrame, ClientFrame, ErrorFrame, ServerFrame, SyncFrame, VersionFrame } from '../../protocol/frames.js';
import { LIMITS } from '../../protocol/limits.js';
import { Backoff, DEFAULT_BACKOFF } from './backoff.js';
import type { CacheAdapter } from './cache/cache.js';
import { Connection } from './connection.js';
import { Emitter } from './emitter.js';
import { watchLifecycle } from './lifecycle.js';
import { ReadBatcher } from './read-batcher.js';
import { PushSequencer } from './sequencer.js';
import { SettingsQueue } from './settings-queue.js';
import type { WebSocketConstructor } from './socket.js';
import { ConvStore, type SettingsChange } from './store.js';
import { Timer, realTimers } from './timers.js';
import { deriveState } from './state.js';
import type { ClientOptions, ConversationView, RedpointEvents, RedpointState } from './types.js';

/** Error codes after which the same request may succeed later. */
const TRANSIENT: ReadonlySet<string> = new Set<ErrorCode>(['unavailable', 'outcome_unknown', 'rate_limited', 'internal']);

/**
 * Red dots that are never wrong: applies pushes strictly in version order, pulls on any gap, on
 * reconnect and when the page comes back, shows this device's reads at once (and never lets an
 * older server state bring a cleared dot back), and keeps the last known counts in a cache.
 */
export class RedpointClient {
  private readonly events = new Emitter<RedpointEvents>();
  private readonly store = new ConvStore();
  private readonly pushes = new PushSequencer();
  private readonly connection: Connection;
  private readonly backoff: Backoff;
  private readonly reads: ReadBatcher;
  private readonly settingsQueue: SettingsQueue;
  private readonly cache: CacheAdapter | undefined;
  private readonly gapTimer: Timer;
  private readonly pullRetryTimer: Timer;
  private readonly saveTimer: Timer;
  private readonly gapWaitMs: number;
  private readonly retryMs: number;
  private readonly cacheDebounceMs: number;
  private nextId = 1;
  /** Request id of the pull in flight; 0 while waiting for the sync that answers hello. */
  private pullId: number | null = null;
  private pullAgain = false;
  /** A pull completed on the current connection: the numbers are confirmed, not stale. */
  private confirmed = false;
  private started = false;
  private stopLifecycle: () => void = () => undefined;
  private current: RedpointState;
  private lastStatusKey = '';
  private lastCloseCode: number | undefined;

  constructor(private readonly options: ClientOptions) {
    const timers = options.timers ?? realTimers;
    this.cache = options.cache;
    // The contract is to pull within 500 ms of seeing a gap.
    this.gapWaitMs = Math.min(options.gapWaitMs ?? 300, 450);
    this.retryMs = options.retryMs ?? 1000;
    this.cacheDebounceMs = options.cacheDebounceMs ?? 200;
    this.backoff = new Backoff({ ...DEFAULT_BACKOFF, ...options.backoff }, options.random ?? Math.random);
    const WebSocketClass = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WebSocketClass) throw new Error('RedpointClient: no WebSocket available; pass one (in Node 20: the `ws` package)');
    this.connection = new Connection(
      { url: options.url, token: options.token, WebSocket: WebSocketClass, binary: options.binary ?? false, timers, backoff: this.backoff, welcomeTimeoutMs: 10_000 },
      {
        hello: () => ({ ...(this.store.cursor ? { cursor: this.store.cursor } : {}), ...(options.device ? { device: options.device } : {}) }),
        welcomed: (welcome) => this.onWelcome(welcome.uid),
        frame: (frame) => this.onFrame(frame),
        down: () => this.onDown(),
        state: (_state, code) => {
          this.lastCloseCode = code;
          this.changed();
        },
        error: (err) => this.events.emit('error', err),
      },
    );
    this.reads = new ReadBatcher({
      timers,
      delayMs: options.readBatchMs ?? 500,
      maxBatch: options.readBatchSize ?? 20,
      retryMs: this.retryMs,
      send: (reads) => this.request((id) => ({ t: 'read', id, reads })),
    });
    this.settingsQueue = new SettingsQueue({
      timers,
      retryMs: this.retryMs,
      send: (conv, change) => this.request((id) => ({ t: 'settings', id, conv, ...change })),
    });
    this.gapTimer = new Timer(timers, () => this.onGapTimeout());
    this.pullRetryTimer = new Timer(timers, () => this.pull());
    this.saveTimer = new Timer(timers, () => void this.save());
    this.current = this.build();
  }

  /** The current picture (a new object after each change: usable as a React external store snapshot). */
  get state(): RedpointState {
    return this.current;
  }

  on<K extends keyof RedpointEvents>(type: K, listener: (payload: RedpointEvents[K]) => void): () => void {
    return this.events.on(type, listener);
  }

  /** `useSyncExternalStore(client.subscribe, () => client.state)` */
  subscribe = (listener: () => void): (() => void) => this.events.on('change', listener);

  conversation(conv: string): ConversationView | undefined {
    return this.current.conversations.find((c) => c.conv === conv);
  }

  /** Newest message seq known for `conv`, hidden (deleted) conversations included; 0 if unknown. */
  lastSeq(conv: string): number {
    return this.store.lastSeq(conv);
  }

  /** Loads the cache (its counts show at once, marked stale), then connects. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    if (this.cache) {
      try {
        const cached = await this.cache.load();
        if (cached && !this.store.hasData) {
          this.store.restore(cached);
          for (const [conv, seq] of cached.reads) this.reads.add(conv, seq);
        }
      } catch (err) {
        this.events.emit('error', err instanceof Error ? err : new Error(String(err)));
      }
    }
    if (this.options.lifecycle ?? true) this.stopLifecycle = watchLifecycle(() => this.refresh(), () => this.connection.reconnectNow());
    this.connection.start();
    this.changed();
  }

  /** Closes the socket and writes the cache. Reads not yet acknowledged stay in the cache. */
  async stop(): Promise<void> {
    this.stopLifecycle();
    this.connection.stop();
    // The same teardown as a dropped socket (which connection.stop does not report), minus the reconnect.
    this.onDown();
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
      this.store.optimisticRead(conv, seq);
      this.reads.add(conv, seq);
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

  markUnread(conv: string, markedUnread = true): Promise<void> {
    return this.settings(conv, { markedUnread });
  }

  /** Hides the conversation until its next message. */
  deleteConversation(conv: string): Promise<void> {
    return this.settings(conv, { deleted: true });
  }

  /** Pulls now (e.g. on pull-to-refresh). */
  refresh(): void {
    if (this.connection.open) this.pull();
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
    if (!this.connection.send(frame(id))) return null;
    this.nextId = id + 1 >= LIMITS.requestIdMax ? 1 : id + 1;
    return id;
  }

  private onWelcome(uid: string): void {
    if (this.store.uid !== null && this.store.uid !== uid) {
      this.store.clear();
      this.reads.clear();
      this.pushes.clear();
    }
    this.store.uid = uid;
    // The server answers hello with a sync page, like a pull.
    this.pullId = 0;
    this.pullAgain = false;
    this.reads.flush();
    this.settingsQueue.flush();
    this.changed();
  }

  private onFrame(frame: ServerFrame): void {
    switch (frame.t) {
      case 'sync':
        return this.onSync(frame);
      case 'change':
        return this.onChange(frame);
      case 'head':
        this.store.applyHead(frame.conv, frame.lastSeq);
        return this.changed();
      case 'version':
        return this.onVersion(frame);
      case 'ack':
        return this.onAck(frame);
      case 'error':
        return this.onError(frame);
      case 'welcome':
        return;
    }
  }

  private onSync(frame: SyncFrame): void {
    if (this.pullId === null || (frame.id ?? 0) !== this.pullId) return;
    this.pullId = null;
    if (!this.store.applyReply(frame)) return this.pull(true);
    if (frame.more) return this.pull();
    this.confirmed = true;
    this.backoff.reset();
    this.applyPushes();
    if (this.pullAgain) {
      this.pullAgain = false;
      this.pull();
    }
  }

  private onChange(change: ChangeFrame): void {
    const cursor = this.store.cursor;
    if (this.pullId !== null || !cursor) {
      this.pushes.add(change);
      return;
    }
    // Another history (the server lost its state): only a snapshot can continue from here.
    if (change.epoch !== cursor.epoch) return this.pull();
    if (change.v <= cursor.version) return;
    this.pushes.add(change);
    this.applyPushes();
  }

  private onVersion(frame: VersionFrame): void {
    const cursor = this.store.cursor;
    // Heads of read-diffused groups are not in the stream, so no version reveals a lost `head`
    // push: a member of such a group re-reads them with a (cheap, empty) delta pull.
    if (!cursor || frame.epoch !== cursor.epoch || frame.version > cursor.version || this.store.hasLargeGroups) this.pull();
  }

  private onAck(frame: AckFrame): void {
    const cursor = { epoch: frame.epoch, version: frame.version };
    const rejected = new Set((frame.rejected ?? []).map((r) => r.conv));
    const reads = this.reads.ack(frame.id);
    for (const [conv, seq] of reads ?? []) {
      if (rejected.has(conv)) this.store.dropRead(conv);
      else this.store.ackRead(conv, seq, cursor);
    }
    if (!reads) {
      const conv = this.settingsQueue.ack(frame.id);
      if (conv !== undefined) this.store.ackSettings(conv, cursor);
    }
    // The ack names the version that includes this change: if the push for it never comes, pull.
    const mine = this.store.cursor;
    if (!mine) return;
    if (mine.epoch !== frame.epoch) return this.pull();
    this.pushes.expect(cursor);
    this.applyPushes();
  }

  private onError(frame: ErrorFrame): void {
    const id = frame.id;
    const transient = TRANSIENT.has(frame.code);
    if (id === undefined) {
      // The sync that answers hello failed ("pull to retry").
      if (this.pullId === 0) this.retryPullLater();
    } else if (id === this.pullId) {
      this.retryPullLater();
    } else if (this.reads.owns(id)) {
      // A passing failure is sent again after retryMs; a refused batch will never apply.
      if (transient) this.reads.retry(id);
      else for (const [conv] of this.reads.ack(id) ?? []) this.store.dropRead(conv);
    } else if (this.settingsQueue.owns(id)) {
      // Likewise for settings; a refused one also takes its optimistic change back.
      if (transient) this.settingsQueue.retry(id);
      else {
        const conv = this.settingsQueue.fail(id, new Error(`${frame.code}: ${frame.message}`));
        if (conv !== undefined) this.store.dropSettings(conv);
      }
    }
    this.events.emit('error', new Error(`server error ${frame.code}: ${frame.message}`));
    this.changed();
  }

  private retryPullLater(): void {
    this.pullId = null;
    this.pullRetryTimer.rearm(this.retryMs);
  }

  /** Applies waiting pushes that continue the cursor; a gap that remains gets `gapWaitMs` to fill. */
  private applyPushes(): void {
    const cursor = this.store.cursor;
    if (cursor) {
      for (const change of this.pushes.take(cursor)) this.store.applyChange(change);
      const now = this.store.cursor ?? cursor;
      if (this.pushes.behind(now)) this.gapTimer.arm(this.gapWaitMs);
      else this.gapTimer.cancel();
    }
    this.changed();
  }

  private onGapTimeout(): void {
    const cursor = this.store.cursor;
    if (!cursor || this.pushes.behind(cursor)) this.pull();
  }

  private pull(fromScratch = false): void {
    this.pullRetryTimer.cancel();
    if (!this.connection.open) return;
    if (this.pullId !== null) {
      this.pullAgain = true;
      return;
    }
    this.gapTimer.cancel();
    const since = fromScratch ? null : this.store.cursor;
    this.pullId = this.request((id) => ({ t: 'pull', id, ...(since ? { since } : {}) }));
    this.changed();
  }

  private onDown(): void {
    this.pullId = null;
    this.pullAgain = false;
    this.confirmed = false;
    this.gapTimer.cancel();
    this.pullRetryTimer.cancel();
    this.pushes.clear();
    this.reads.disconnected();
    this.settingsQueue.disconnected();
  }

  private build(): RedpointState {
    return deriveState({
      store: this.store,
      connection: this.connection.state,
      open: this.connection.open,
      confirmed: this.confirmed,
      pulling: this.pullId !== null,
      gap: this.store.cursor !== null && this.pushes.behind(this.store.cursor),
      unacked: this.reads.pending + this.settingsQueue.pending,
    });
  }

  private changed(): void {
    if (!this.started) return;
    this.current = this.build();
    this.events.emit('change', this.current);
    const { status, stale, connection } = this.current;
    const key = `${status}|${stale}|${connection}`;
    if (key !== this.lastStatusKey) {
      this.lastStatusKey = key;
      this.events.emit('status', { status, stale, connection, ...(this.lastCloseCode !== undefined ? { closeCode: this.lastCloseCode } : {}) });
    }
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
