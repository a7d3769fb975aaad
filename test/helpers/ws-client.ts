import WebSocket from 'ws';
import { decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import type { AckFrame, ChangeFrame, ErrorFrame, HeadFrame, ServerFrame, SyncFrame, VersionFrame, WelcomeFrame } from '../../protocol/frames.js';
import type { ConvState, ConvView, Cursor, UnreadSummary } from '../../protocol/types.js';
import { summarize, toView } from '../../protocol/view.js';

/**
 * A test client of `/v1/ws` that behaves as PROTOCOL.md asks a client to: hello (with its cursor),
 * a sync page replaces everything when it carries a snapshot, `more` → pull again, a `change`
 * push is applied only when it is the next version (otherwise the client pulls from its cursor),
 * `head` frames raise heads, a `version` frame ahead of the cursor triggers a pull.
 *
 * Pushes that arrive while a pull is in flight are held and replayed after the reply, so a late
 * reply never overwrites a newer pushed state. Protocol violations seen on the way (a delta from
 * another epoch, a cursor going back, entries out of order) are collected in `violations`.
 *
 * Everything a test waits for goes through `waitFor` / `waitFrame` / `waitClose`: they resolve on
 * the event, with a timeout only as a bound.
 */
export interface WsClientOptions {
  token: string;
  /** MessagePack binary frames (default: JSON text). */
  binary?: boolean;
  device?: string;
  /** Sent in hello (a reconnect); default none: the first sync is a snapshot. */
  cursor?: Cursor | null;
  /** The local copy a reconnecting client kept (its cursor is sent in hello unless `cursor` is given). */
  saved?: SavedState;
  /** Send hello once open (default true). */
  hello?: boolean;
  /** Page size of this client's pulls (default: the server's). */
  pullLimit?: number;
}

/** What a client keeps across connections: cursor, conversation states, heads. */
export interface SavedState {
  cursor: Cursor | null;
  states: ConvState[];
  heads: Record<string, number>;
}

export interface Received {
  frame: ServerFrame;
  /** The frame came as a binary (MessagePack) WebSocket message. */
  binary: boolean;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

export interface ClientStats {
  /** Sync pages received, and how many carried a snapshot. */
  pages: number;
  snapshots: number;
  pullsSent: number;
  /** Pulls caused by a push that was not the next version. */
  gapPulls: number;
  /** Pulls caused by a `version` frame ahead of the cursor. */
  versionPulls: number;
  pushesApplied: number;
  /** Pushes at or below the cursor (already had them). */
  pushesStale: number;
  /** Pushes dropped on purpose by `dropNext`. */
  pushesDropped: number;
}

interface Waiter {
  check(): boolean;
  resolve(): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  failOnClose: boolean;
  label: string;
}

const DEFAULT_TIMEOUT_MS = 5000;

export class WsClient {
  readonly frames: Received[] = [];
  readonly violations: string[] = [];
  readonly stats: ClientStats = { pages: 0, snapshots: 0, pullsSent: 0, gapPulls: 0, versionPulls: 0, pushesApplied: 0, pushesStale: 0, pushesDropped: 0 };
  states = new Map<string, ConvState>();
  heads: Record<string, number> = {};
  cursor: Cursor | null;
  welcome: WelcomeFrame | null = null;
  closeInfo: CloseInfo | null = null;
  /** Resolves when the socket closes (never rejects). */
  readonly closed: Promise<CloseInfo>;

  private readonly binary: boolean;
  private nextId = 1;
  /** Id of the pull chain in flight ('hello' for the reply to hello), or null. */
  private inflight: number | 'hello' | null = null;
  private wantPull = false;
  private held: ChangeFrame[] = [];
  private chainsStarted = 0;
  private chainsDone = 0;
  private readonly drops: Array<(f: ServerFrame) => boolean> = [];
  private readonly waiters = new Set<Waiter>();
  private readonly replies = new Map<number, (f: AckFrame | ErrorFrame | SyncFrame) => void>();

  private constructor(
    private readonly socket: WebSocket,
    private readonly options: WsClientOptions,
  ) {
    this.binary = options.binary ?? false;
    this.cursor = options.cursor !== undefined ? options.cursor : (options.saved?.cursor ?? null);
    if (options.saved) {
      this.states = new Map(options.saved.states.map((st) => [st.conv, { ...st }]));
      this.heads = { ...options.saved.heads };
    }
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
        this.notify();
      });
    });
    socket.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    // Errors (e.g. the server resetting the connection) surface as a close; keep them from throwing.
    socket.on('error', () => undefined);
  }

  /** Opens the socket (and sends hello unless `hello: false`). */
  static async open(url: string, options: WsClientOptions): Promise<WsClient> {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    const client = new WsClient(socket, options);
    if (options.hello !== false) client.hello();
    return client;
  }

  get uid(): string {
    if (!this.welcome) throw new Error('no welcome yet');
    return this.welcome.uid;
  }

  get isOpen(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  /** Sends hello with the current cursor; its reply counts as a pull in flight. */
  hello(): void {
    this.inflight = 'hello';
    this.chainsStarted++;
    this.send({
      t: 'hello',
      token: this.options.token,
      ...(this.cursor ? { cursor: this.cursor } : {}),
      ...(this.options.device ? { device: this.options.device } : {}),
    });
  }

  /** Waits for the welcome and the end of the first sync. */
  async ready(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    await this.waitFor(() => this.welcome !== null && this.chainsDone >= 1 && this.inflight === null, timeoutMs, 'welcome + first sync');
  }

  send(frame: object): void {
    if (this.binary) this.socket.send(encodeMsgpack(frame), { binary: true });
    else this.socket.send(JSON.stringify(frame), { binary: false });
  }

  /** Anything at all, in either kind of WebSocket message. */
  sendRaw(data: string | Uint8Array, binary: boolean): void {
    this.socket.send(data, { binary });
  }

  /** A pull from the cursor, finished (every page applied). Resolves after a chain started by this call ends. */
  async sync(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    // Either a chain starts now, or (one in flight) the next one starts after it: both are this number.
    const target = this.chainsStarted + 1;
    this.requestPull();
    await this.waitFor(() => this.chainsDone >= target, timeoutMs, 'sync');
  }

  /** Resolves once no pull is in flight or wanted. */
  async settled(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<void> {
    await this.waitFor(() => this.inflight === null && !this.wantPull, timeoutMs, 'settled');
  }

  /** Read reports; resolves with the ack (or the error frame) of this request. */
  read(reads: Array<[string, number]>, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame> {
    return this.request({ t: 'read', reads }, timeoutMs) as Promise<AckFrame | ErrorFrame>;
  }

  settings(conv: string, change: { muted?: boolean; markedUnread?: boolean; deleted?: true }, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame> {
    return this.request({ t: 'settings', conv, ...change }, timeoutMs) as Promise<AckFrame | ErrorFrame>;
  }

  /** Sends a frame with a fresh `id` and resolves with the reply carrying that id. */
  request(frame: Record<string, unknown>, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame | SyncFrame> {
    const id = this.nextId++;
    let reply: AckFrame | ErrorFrame | SyncFrame | undefined;
    this.replies.set(id, (f) => {
      reply = f;
    });
    this.send({ ...frame, id });
    return this.waitFor(() => reply !== undefined, timeoutMs, `reply to ${String(frame.t)} #${id}`).then(() => {
      this.replies.delete(id);
      return reply as AckFrame | ErrorFrame | SyncFrame;
    });
  }

  /** Ignore the next received frame matching `match` (a push lost on the way). */
  dropNext(match: (f: ServerFrame) => boolean): void {
    this.drops.push(match);
  }

  /** Index to pass to `waitFrame` / `framesSince` to only look at frames received from now on. */
  mark(): number {
    return this.frames.length;
  }

  framesSince(mark: number): ServerFrame[] {
    return this.frames.slice(mark).map((r) => r.frame);
  }

  framesOf<T extends ServerFrame['t']>(t: T, since = 0): Array<Extract<ServerFrame, { t: T }>> {
    return this.framesSince(since).filter((f): f is Extract<ServerFrame, { t: T }> => f.t === t);
  }

  /** Waits for a frame (received at index >= `since`) that matches, and returns it. */
  async waitFrame<T extends ServerFrame = ServerFrame>(match: (f: ServerFrame) => f is T, opts?: { since?: number; timeoutMs?: number; label?: string }): Promise<T>;
  async waitFrame(match: (f: ServerFrame) => boolean, opts?: { since?: number; timeoutMs?: number; label?: string }): Promise<ServerFrame>;
  async waitFrame(match: (f: ServerFrame) => boolean, opts: { since?: number; timeoutMs?: number; label?: string } = {}): Promise<ServerFrame> {
    let found: ServerFrame | undefined;
    const since = opts.since ?? 0;
    await this.waitFor(
      () => {
        found = this.frames.slice(since).find((r) => match(r.frame))?.frame;
        return found !== undefined;
      },
      opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      opts.label ?? 'frame',
    );
    return found as ServerFrame;
  }

  /** Resolves when `check()` holds, checked now and after every received frame. */
  waitFor(check: () => boolean, timeoutMs = DEFAULT_TIMEOUT_MS, label = 'condition', failOnClose = true): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        check,
        label,
        failOnClose,
        resolve: () => {
          clearTimeout(waiter.timer);
          this.waiters.delete(waiter);
          resolve();
        },
        reject: (err) => {
          clearTimeout(waiter.timer);
          this.waiters.delete(waiter);
          reject(err);
        },
        timer: setTimeout(() => waiter.reject(new Error(`timeout (${timeoutMs} ms) waiting for ${label}; ${this.describe()}`)), timeoutMs),
      };
      this.waiters.add(waiter);
      if (this.closeInfo && failOnClose) waiter.reject(new Error(`socket closed while waiting for ${label}: ${JSON.stringify(this.closeInfo)}`));
    });
  }

  /** Waits for the socket to be closed (by the server) and returns the code. */
  async waitClose(timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CloseInfo> {
    await this.waitFor(() => this.closeInfo !== null, timeoutMs, 'close', false);
    return this.closeInfo as CloseInfo;
  }

  async close(): Promise<void> {
    if (this.closeInfo) return;
    this.socket.close(1000);
    await this.closed;
  }

  /** Hard close without a close frame (a dead network). */
  terminate(): void {
    this.socket.terminate();
  }

  /** A copy of the local state, to reconnect with later. */
  save(): SavedState {
    return { cursor: this.cursor ? { ...this.cursor } : null, states: [...this.states.values()].map((st) => ({ ...st })), heads: { ...this.heads } };
  }

  /** Visible conversations, sorted by id, derived exactly as the server does. */
  views(): ConvView[] {
    const out: ConvView[] = [];
    for (const s of this.states.values()) {
      const v = toView(s, this.heads);
      if (v) out.push(v);
    }
    return out.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
  }

  summary(): UnreadSummary {
    if (!this.cursor) throw new Error('no cursor yet');
    return summarize(this.welcome?.uid ?? '', this.cursor.epoch, this.cursor.version, this.states.values(), this.heads);
  }

  describe(): string {
    const last = this.frames.slice(-5).map((r) => JSON.stringify(r.frame).slice(0, 200));
    return `cursor=${JSON.stringify(this.cursor)} inflight=${String(this.inflight)} closed=${JSON.stringify(this.closeInfo)} last frames: ${last.join(' | ')}`;
  }

  private onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    let frame: ServerFrame;
    try {
      frame = (isBinary ? decodeMsgpack(bytes) : JSON.parse(bytes.toString('utf8'))) as ServerFrame;
    } catch {
      this.violations.push(`undecodable ${isBinary ? 'binary' : 'text'} frame`);
      return;
    }
    if (isBinary !== this.binary) this.violations.push(`a ${isBinary ? 'binary' : 'text'} frame on a ${this.binary ? 'binary' : 'text'} client: ${frame.t}`);
    this.frames.push({ frame, binary: isBinary });
    const drop = this.drops.findIndex((m) => m(frame));
    if (drop >= 0) {
      this.drops.splice(drop, 1);
      this.stats.pushesDropped++;
    } else {
      this.handle(frame);
    }
    this.notify();
  }

  private handle(frame: ServerFrame): void {
    switch (frame.t) {
      case 'welcome':
        this.welcome = frame;
        return;
      case 'sync':
        if (frame.id !== undefined) this.replies.get(frame.id)?.(frame);
        this.onSync(frame);
        return;
      case 'change':
        if (this.inflight !== null) this.held.push(frame);
        else this.onChange(frame);
        return;
      case 'head':
        this.onHead(frame);
        return;
      case 'version':
        this.onVersion(frame);
        return;
      case 'ack':
        this.replies.get(frame.id)?.(frame);
        return;
      case 'error':
        if (frame.id !== undefined) this.replies.get(frame.id)?.(frame);
        return;
    }
  }

  private onSync(f: SyncFrame): void {
    this.stats.pages++;
    const previous = this.cursor;
    if (f.snapshot) {
      this.stats.snapshots++;
      if (f.snapshot.v > f.version) this.violations.push(`snapshot v${f.snapshot.v} beyond reply version ${f.version}`);
      this.states = new Map(f.snapshot.convs.map((s) => [s.conv, { ...s }]));
    } else if (!previous) {
      this.violations.push('first sync without a snapshot');
    } else if (previous.epoch !== f.epoch) {
      this.violations.push(`delta from epoch ${f.epoch} applied to a cursor of epoch ${previous.epoch}`);
    }
    let last = f.snapshot ? f.snapshot.v : (previous?.version ?? 0);
    for (const e of f.entries) {
      if (e.v <= last) this.violations.push(`entry v${e.v} not after v${last}`);
      last = e.v;
      if (e.state === null) this.states.delete(e.conv);
      else this.states.set(e.conv, { ...e.state });
    }
    if (f.version !== last) this.violations.push(`reply version ${f.version} but last applied v${last}`);
    if (previous && previous.epoch === f.epoch && f.version < previous.version) {
      this.violations.push(`cursor went back from ${previous.version} to ${f.version}`);
    }
    this.cursor = { epoch: f.epoch, version: f.version };
    for (const [conv, seq] of Object.entries(f.heads)) this.heads[conv] = Math.max(this.heads[conv] ?? 0, seq);

    // Replies to pulls sent by hand (request()) are applied too, but only our own chain drives paging.
    const ours = f.id === undefined ? this.inflight === 'hello' : f.id === this.inflight;
    if (!ours) return;
    if (f.more) {
      this.sendPull();
      return;
    }
    this.inflight = null;
    this.chainsDone++;
    const held = this.held.sort((a, b) => a.v - b.v);
    this.held = [];
    for (const change of held) {
      if (this.inflight !== null) this.held.push(change);
      else this.onChange(change);
    }
    if (this.wantPull && this.inflight === null) {
      this.wantPull = false;
      this.requestPull();
    }
  }

  private onChange(f: ChangeFrame): void {
    const c = this.cursor;
    if (c && f.epoch === c.epoch && f.v === c.version + 1) {
      if (f.state === null) this.states.delete(f.conv);
      else this.states.set(f.conv, { ...f.state });
      this.cursor = { epoch: c.epoch, version: f.v };
      this.stats.pushesApplied++;
      return;
    }
    if (c && f.epoch === c.epoch && f.v <= c.version) {
      this.stats.pushesStale++;
      return;
    }
    this.stats.gapPulls++;
    this.requestPull();
  }

  private onHead(f: HeadFrame): void {
    this.heads[f.conv] = Math.max(this.heads[f.conv] ?? 0, f.lastSeq);
  }

  private onVersion(f: VersionFrame): void {
    const c = this.cursor;
    if (c && c.epoch === f.epoch && c.version >= f.version) return;
    this.stats.versionPulls++;
    this.requestPull();
  }

  private requestPull(): void {
    if (this.inflight !== null) {
      this.wantPull = true;
      return;
    }
    this.chainsStarted++;
    this.sendPull();
  }

  private sendPull(): void {
    const id = this.nextId++;
    this.inflight = id;
    this.stats.pullsSent++;
    this.send({
      t: 'pull',
      id,
      ...(this.cursor ? { since: this.cursor } : {}),
      ...(this.options.pullLimit ? { limit: this.options.pullLimit } : {}),
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) {
      try {
        if (w.check()) w.resolve();
        else if (this.closeInfo && w.failOnClose) w.reject(new Error(`socket closed while waiting for ${w.label}: ${JSON.stringify(this.closeInfo)}`));
      } catch (err) {
        w.reject(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }
}
