import WebSocket from 'ws';
import { decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import type { AckFrame, ErrorFrame, RefreshedFrame, ServerFrame, SyncFrame, WelcomeFrame } from '../../protocol/frames.js';
import type { ConvState, Cursor, UnreadSummary } from '../../protocol/types.js';
import { clientSummary } from './client-view.js';
import { type SavedState, SyncReplica } from './sync-replica.js';

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

export interface Received {
  frame: ServerFrame;
  /** The frame came as a binary (MessagePack) WebSocket message. */
  binary: boolean;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

interface Waiter {
  check(): boolean;
  resolve(): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  failOnClose: boolean;
  label: string;
}

/** Wait before pulling again after a pull was refused without a hint (`unavailable`). */
const PULL_RETRY_MS = 200;
const DEFAULT_TIMEOUT_MS = 5000;

/**
 * A test client of `/v1/ws` that behaves as PROTOCOL.md asks a client to: hello (with its
 * cursor), then the sync rules of SyncReplica for everything the server sends. On top of them: a
 * log of every frame received, requests matched with their reply by id, pushes dropped on purpose
 * (`dropNext`), and waits.
 *
 * Everything a test waits for goes through `waitFor` / `waitFrame` / `waitClose`: they resolve on
 * the event, with a timeout only as a bound.
 */
export class WsClient extends SyncReplica {
  readonly frames: Received[] = [];
  welcome: WelcomeFrame | null = null;
  closeInfo: CloseInfo | null = null;
  /** `sync-part` frames received (a snapshot sent in parts). */
  partsReceived = 0;
  /** Bytes of the largest frame received. */
  largestFrameBytes = 0;
  /** Parts of a snapshot held until the `sync` with the same id (hello: none) completes them. */
  private readonly snapshotParts = new Map<number | 'hello', { v: number; convs: ConvState[] }>();
  /** Resolves when the socket closes (never rejects). */
  readonly closed: Promise<CloseInfo>;

  private readonly binary: boolean;
  private readonly drops: Array<(f: ServerFrame) => boolean> = [];
  private readonly waiters = new Set<Waiter>();
  private readonly replies = new Map<number, (f: AckFrame | ErrorFrame | SyncFrame | RefreshedFrame) => void>();

  private constructor(
    private readonly socket: WebSocket,
    private readonly options: WsClientOptions,
  ) {
    super(options.cursor, options.saved, options.pullLimit);
    this.binary = options.binary ?? false;
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
    this.helloSent();
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

  /** Read reports; resolves with the ack (or the error frame) of this request. */
  read(reads: Array<[string, number]>, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame> {
    return this.request({ t: 'read', reads }, timeoutMs) as Promise<AckFrame | ErrorFrame>;
  }

  settings(conv: string, change: { muted?: boolean; markedUnread?: boolean; deleted?: true }, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame> {
    return this.request({ t: 'settings', conv, ...change }, timeoutMs) as Promise<AckFrame | ErrorFrame>;
  }

  /** Sends a frame with a fresh `id` and resolves with the reply carrying that id. */
  request(frame: Record<string, unknown>, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<AckFrame | ErrorFrame | SyncFrame | RefreshedFrame> {
    const id = this.nextId++;
    let reply: AckFrame | ErrorFrame | SyncFrame | RefreshedFrame | undefined;
    this.replies.set(id, (f) => {
      reply = f;
    });
    this.send({ ...frame, id });
    return this.waitFor(() => reply !== undefined, timeoutMs, `reply to ${String(frame.t)} #${id}`).then(() => {
      this.replies.delete(id);
      return reply as AckFrame | ErrorFrame | SyncFrame | RefreshedFrame;
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
  async waitFrame<T extends ServerFrame = ServerFrame>(
    match: (f: ServerFrame) => f is T,
    opts?: { since?: number; timeoutMs?: number; label?: string },
  ): Promise<T>;
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

  summary(): UnreadSummary {
    if (!this.cursor) throw new Error('no cursor yet');
    // Derived from PROTOCOL.md, not with protocol/view.ts (the server's derivation): helpers/client-view.ts.
    return clientSummary(this.welcome?.uid ?? '', this.cursor.epoch, this.cursor.version, this.states.values(), this.heads, this.extrasRecord());
  }

  describe(): string {
    const last = this.frames.slice(-5).map((r) => JSON.stringify(r.frame).slice(0, 200));
    return `cursor=${JSON.stringify(this.cursor)} inflight=${String(this.inflight)} closed=${JSON.stringify(this.closeInfo)} last frames: ${last.join(' | ')}`;
  }

  private onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    this.largestFrameBytes = Math.max(this.largestFrameBytes, bytes.byteLength);
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
      case 'ack':
      case 'refreshed':
        this.replies.get(frame.id)?.(frame);
        return;
      case 'error':
        if (frame.id !== undefined) this.replies.get(frame.id)?.(frame);
        // Our own pull refused: pull again after the hint, as a client must.
        if (frame.id !== undefined && this.pullFailed(frame.id)) {
          const retry = setTimeout(() => {
            if (!this.closeInfo) this.requestPull();
          }, frame.retryAfterMs ?? PULL_RETRY_MS);
          retry.unref();
        }
        return;
      case 'sync-part': {
        // PROTOCOL.md "Snapshots in parts": held by the reply's id until its sync completes it.
        const key = frame.id ?? 'hello';
        const held = this.snapshotParts.get(key);
        if (held && held.v !== frame.v) this.violations.push(`sync-part v ${frame.v} after parts of v ${held.v} (${String(key)})`);
        if (held) held.convs.push(...frame.convs);
        else this.snapshotParts.set(key, { v: frame.v, convs: [...frame.convs] });
        this.partsReceived++;
        return;
      }
      case 'sync': {
        const key = frame.id ?? 'hello';
        const held = this.snapshotParts.get(key);
        this.snapshotParts.delete(key);
        let whole = frame;
        if (held) {
          if (!frame.snapshot || frame.snapshot.v !== held.v) this.violations.push(`sync ${String(key)} does not complete its parts of v ${held.v}`);
          else whole = { ...frame, snapshot: { v: held.v, convs: [...held.convs, ...frame.snapshot.convs] } };
        }
        if (whole.id !== undefined) this.replies.get(whole.id)?.(whole);
        this.receive(whole);
        return;
      }
      case 'reads':
        // Read receipts: not part of the stream; tests look at them in `frames`.
        return;
      default:
        this.receive(frame);
    }
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
