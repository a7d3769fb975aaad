import type { ServerFrame, SyncFrame } from '../../protocol/frames.js';
import type { ConvState, Cursor } from '../../protocol/types.js';
import { type JsonWsClient, jsonWsClient } from './json-ws.js';

/** The server's view of one user (GET /v1/users/:uid/unread), to compare a client against. */
export interface ExpectedState {
  epoch: string;
  version: number;
  convs: ReadonlyMap<string, { lastSeq: number; readSeq: number }>;
}

/**
 * A Redpoint client that keeps the user's state the way the protocol says to (PROTOCOL.md): hello
 * with its cursor, apply the sync page (a snapshot replaces everything), pull while `more`, apply
 * a pushed change only when it is the next version, pull on a gap or a version frame ahead of it.
 * JSON text frames. `onApplied` runs after every change to the state (to check convergence).
 */
export class SyncClient {
  epoch = '';
  version = 0;
  readonly convs = new Map<string, ConvState>();
  pulls = 0;
  snapshots = 0;
  errors = 0;
  onApplied: (() => void) | undefined;
  /** performance.now() when the socket of the last connect opened, and when its first sync page arrived. */
  openedAt = NaN;
  syncedAt = NaN;
  private ws: JsonWsClient | undefined;
  private nextId = 1;
  private readonly parts = new Map<number, ConvState[]>();
  private pulling = false;
  /** Highest version a push or version frame showed: a pull that ends below it pulls again. */
  private wanted = 0;

  constructor(
    readonly uid: string,
    private readonly token: string,
  ) {}

  get cursor(): Cursor | undefined {
    return this.epoch ? { epoch: this.epoch, version: this.version } : undefined;
  }

  /** Connects with the cursor it holds; resolves at the first sync page. */
  async connect(port: number, localAddress?: string): Promise<void> {
    this.pulling = true;
    this.openedAt = NaN;
    this.syncedAt = NaN;
    const cursor = this.cursor;
    const hello = JSON.stringify({ t: 'hello', token: this.token, ...(cursor ? { cursor } : {}) });
    this.ws = await jsonWsClient<ServerFrame>(`ws://127.0.0.1:${port}/v1/ws`, `sync client ${this.uid}`, (frame) => this.onFrame(frame), {
      onOpen: (ws) => {
        this.openedAt = performance.now();
        ws.send(hello);
      },
      ...(localAddress ? { localAddress } : {}),
    });
  }

  close(): void {
    this.ws?.close();
    this.ws = undefined;
  }

  matches(e: ExpectedState): boolean {
    if (e.epoch !== this.epoch || e.version !== this.version || e.convs.size !== this.convs.size) return false;
    for (const [conv, want] of e.convs) {
      const have = this.convs.get(conv);
      if (!have || have.lastSeq !== want.lastSeq || have.readSeq !== want.readSeq) return false;
    }
    return true;
  }

  private onFrame(frame: ServerFrame): 'ok' | 'ready' | 'error' {
    switch (frame.t) {
      case 'sync': {
        const first = frame.id === undefined;
        if (first) this.syncedAt = performance.now();
        this.applySync(frame);
        return first ? 'ready' : 'ok';
      }
      case 'sync-part': {
        // PROTOCOL.md "Snapshots in parts": held until the sync with the same id (-1: the hello's).
        const held = this.parts.get(frame.id ?? -1);
        if (held) held.push(...frame.convs);
        else this.parts.set(frame.id ?? -1, [...frame.convs]);
        return 'ok';
      }
      case 'change':
        this.wanted = Math.max(this.wanted, frame.v);
        if (!this.pulling && frame.epoch === this.epoch && frame.v === this.version + 1) {
          if (frame.state) this.convs.set(frame.conv, frame.state);
          else this.convs.delete(frame.conv);
          this.version = frame.v;
          this.onApplied?.();
        } else if (frame.epoch !== this.epoch || frame.v > this.version + 1) {
          this.pull();
        }
        return 'ok';
      case 'version':
        if (frame.epoch !== this.epoch || frame.version > this.version) {
          this.wanted = Math.max(this.wanted, frame.version);
          this.pull();
        }
        return 'ok';
      case 'error':
        this.errors += 1;
        return 'error';
      default:
        return 'ok';
    }
  }

  private applySync(reply: SyncFrame): void {
    const parts = this.parts.get(reply.id ?? -1) ?? [];
    this.parts.delete(reply.id ?? -1);
    if (reply.snapshot) {
      this.snapshots += 1;
      this.convs.clear();
      for (const s of parts) this.convs.set(s.conv, s);
      for (const s of reply.snapshot.convs) this.convs.set(s.conv, s);
    }
    for (const e of reply.entries) {
      if (e.state) this.convs.set(e.conv, e.state);
      else this.convs.delete(e.conv);
    }
    // Versions of another epoch say nothing about this one.
    if (reply.epoch !== this.epoch) this.wanted = reply.version;
    this.epoch = reply.epoch;
    this.version = reply.version;
    this.pulling = false;
    if (reply.more || this.version < this.wanted) this.pull();
    this.onApplied?.();
  }

  private pull(): void {
    if (this.pulling || !this.ws) return;
    this.pulling = true;
    this.pulls += 1;
    this.ws.send({ t: 'pull', id: this.nextId++, ...(this.cursor ? { since: this.cursor } : {}) });
  }
}
