import { CLOSE_CODES } from '../../../protocol/close-codes.js';
import type { ClientFrame, ErrorFrame, HelloFrame, ServerFrame, WelcomeFrame } from '../../../protocol/frames.js';
import { AuthError } from './auth-error.js';
import type { Backoff } from './backoff.js';
import type { WireFrame } from './codec.js';
import { Deadlines, type RequestKey } from './deadlines.js';
import { ClosedError } from './publisher.js';
import { SnapshotParts } from './snapshot-parts.js';
import { Timer, type Timers } from './timers.js';
import type { FrameSocket, Transport } from './transport.js';
import type { ConnectionState } from './types.js';

export interface ConnectionOptions {
  transport: Transport;
  token: () => Promise<string>;
  timers: Timers;
  backoff: Backoff;
  /** A request (or the hello) unanswered this long: the connection is broken; drop it and reconnect. */
  requestTimeoutMs: number;
  /** Nothing received this long on a welcomed socket: ask `idle` for a request (0: never). */
  heartbeatMs: number;
  /** Hellos refused in a row (4003) before giving up (`auth_failed`); a 4002 gives up at once. */
  maxAuthFailures: number;
}

export interface ConnectionHooks {
  /** The hello to send on each new socket (token added here). */
  hello(): Omit<HelloFrame, 't' | 'token'>;
  welcomed(welcome: WelcomeFrame): void;
  frame(frame: ServerFrame): void;
  /** The socket is gone; `final` (what `ready()` rejects with): the client stays closed, none: it reconnects. */
  down(code: number, final: ClosedError | null): void;
  state(state: ConnectionState, closeCode: number | undefined): void;
  error(err: Error): void;
  /** The socket has been quiet for `heartbeatMs`: send a request (its deadline tells if the socket is dead). */
  idle(): void;
}

/**
 * The close code the client uses (and reports) when it drops a connection on which a request
 * went unanswered. Not sent by the server: 4000 is unassigned in protocol/close-codes.ts.
 */
export const REQUEST_TIMEOUT_CLOSE = 4000;

const RECONNECT_BY_CODE = new Map<number, boolean>(Object.values(CLOSE_CODES).map((c) => [c.code, c.reconnect]));
const TOKEN_EXPIRED = CLOSE_CODES.token_expired.code;
const UNAUTHORIZED = CLOSE_CODES.unauthorized.code;
const NORMAL_CLOSURE = 1000;
const REPLIES: ReadonlySet<string> = new Set(['sync', 'ack', 'refreshed', 'error']);
/**
 * The request id of token refreshes: the client numbers its own requests from 1 (client.ts), so
 * 0 is never theirs, and one refresh at a time is all a connection needs.
 */
const REFRESH_ID = 0;
/** Refresh this share of the token's remaining life before it runs out... */
const REFRESH_AHEAD_SHARE = 1 / 3;
/** ...but never earlier than this before it (a 7-day token is refreshed a minute ahead, not days). */
const REFRESH_AHEAD_MAX_MS = 60_000;
/** setTimeout's longest delay: a refresh further away fires early instead (harmless: one more token). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One logical connection over successive sockets: fetches (and caches) the token, says hello,
 * watches that every request is answered, and reconnects with backoff unless the server's close
 * code says not to (CLOSE_CODES in protocol/close-codes.ts). 4003 drops the cached token, so the
 * next attempt fetches a fresh one.
 */
export class Connection {
  state: ConnectionState = 'idle';
  private socket: FrameSocket | null = null;
  private welcomed = false;
  private token: string | null = null;
  /** Bumped per socket: events of an older socket are ignored. */
  private generation = 0;
  private stopped = false;
  private readonly retryTimer: Timer;
  private readonly heartbeat: Timer;
  private readonly refreshTimer: Timer;
  private readonly deadlines: Deadlines;
  /** Date.now() when the server closes this socket for its token's expiry (its own count, sent as a delay). */
  private expiresAt = Number.POSITIVE_INFINITY;
  /** Parts of large snapshots, held until the sync that completes each (per socket). */
  private parts = new SnapshotParts();
  /** Hellos refused (4002 / 4003 before a welcome) since the last welcome. */
  private authFailures = 0;
  /** The `error` frame a refused hello got before its close: the cause reported. */
  private refusal: ErrorFrame | null = null;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly hooks: ConnectionHooks,
  ) {
    this.retryTimer = new Timer(options.timers, () => void this.connect());
    this.heartbeat = new Timer(options.timers, () => {
      if (this.open) this.hooks.idle();
    });
    this.refreshTimer = new Timer(options.timers, () => void this.refresh());
    this.deadlines = new Deadlines(options.timers, options.requestTimeoutMs, (key) => this.broken(key));
  }

  get open(): boolean {
    return this.welcomed && this.socket !== null;
  }

  start(): void {
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.retryTimer.cancel();
    this.heartbeat.cancel();
    this.refreshTimer.cancel();
    this.deadlines.clear();
    this.generation += 1;
    const socket = this.socket;
    this.socket = null;
    this.welcomed = false;
    socket?.close(NORMAL_CLOSURE, 'client stopped');
    this.setState('closed', undefined);
  }

  /**
   * The app says its `token()` is fixed: connects again with a fresh token and the count of
   * refusals started over, after giving up (`auth_failed`, or a close code that said not to
   * reconnect) or while waiting to retry (skipping the backoff).
   */
  restart(): void {
    if (this.state !== 'offline' && this.state !== 'auth_failed' && this.state !== 'closed') return;
    this.authFailures = 0;
    this.token = null;
    if (this.state === 'offline') return this.reconnectNow();
    this.stopped = false;
    void this.connect();
  }

  /** Skip the rest of the backoff (the page became visible, the network came back). */
  reconnectNow(): void {
    if (this.stopped || this.state !== 'offline') return;
    this.retryTimer.cancel();
    void this.connect();
  }

  /**
   * The browser says the network is gone: drop the socket now and wait for it to come back (the
   * `online` event, or the backoff), instead of trusting a socket that may look open for minutes.
   */
  wentOffline(): void {
    if (this.stopped || this.socket === null) return;
    this.generation += 1;
    this.socket.close(REQUEST_TIMEOUT_CLOSE, 'browser offline');
    this.onClose(REQUEST_TIMEOUT_CLOSE, false);
  }

  /** Sends on the welcomed socket; false when there is none (the caller keeps the work for later). */
  send(frame: ClientFrame & { id: number }): boolean {
    if (!this.open || !this.socket) return false;
    this.socket.send(frame);
    this.deadlines.start(frame.id);
    return true;
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const generation = ++this.generation;
    this.setState('connecting', undefined);
    let token: string;
    try {
      token = this.token ?? (await this.options.token());
    } catch (err) {
      if (generation !== this.generation) return;
      this.hooks.error(asError(err));
      this.scheduleReconnect(undefined);
      return;
    }
    if (generation !== this.generation) return;
    this.token = token;
    this.welcomed = false;
    this.refusal = null;
    this.parts = new SnapshotParts();
    const current = () => generation === this.generation;
    try {
      this.socket = this.options.transport({
        open: () => {
          if (!current() || !this.socket) return;
          this.socket.send({ t: 'hello', token, ...this.hooks.hello() });
          this.deadlines.start('hello');
        },
        frame: (frame) => {
          if (current()) this.onFrame(frame);
        },
        closed: (code, _reason, retryNow) => {
          if (current()) this.onClose(code, retryNow ?? false);
        },
      });
    } catch (err) {
      this.hooks.error(asError(err));
      this.scheduleReconnect(undefined);
    }
  }

  private onFrame(wire: WireFrame): void {
    const frame = wire as unknown as ServerFrame;
    // The error a refused hello gets before its close: kept as the cause, nothing to keep alive.
    if (!this.welcomed && frame.t === 'error' && frame.id === undefined) {
      this.refusal = frame;
      return;
    }
    if (this.options.heartbeatMs > 0) this.heartbeat.rearm(this.options.heartbeatMs);
    if (frame.t === 'welcome') {
      this.welcomed = true;
      this.authFailures = 0;
      this.scheduleRefresh(frame.expiresInMs);
      this.setState('open', undefined);
      this.hooks.welcomed(frame);
      return;
    }
    // The server says welcome first; anything else before it belongs to no session (and must
    // not pass for the answer to the hello).
    if (!this.welcomed) return;
    if (frame.t === 'sync-part') {
      this.deadlines.extend(frame.id ?? 'hello');
      return this.parts.add(frame);
    }
    if (frame.t === 'sync') {
      const whole = this.parts.complete(frame);
      // A sync that does not complete its parts is a server's bug: a partial snapshot must
      // never be applied, so the socket is dropped and the reconnect pulls again.
      if (!whole) return this.dropSocket(`sync ${String(frame.id ?? 'hello')} does not complete the snapshot parts before it`);
      if (whole !== frame) return this.onFrame(whole as unknown as WireFrame);
    }
    if (REPLIES.has(frame.t)) {
      const id = (frame as { id?: number }).id;
      // Without an id: the sync that answers hello, or the error saying it failed.
      this.deadlines.settle(id ?? 'hello');
      if (id === REFRESH_ID) return this.refreshed(frame);
    }
    this.hooks.frame(frame);
  }

  /**
   * The socket is served until its token expires, then closed 4003: ahead of that, a new token
   * from `token()` goes to the server in a `refresh` frame, so a long-lived socket outlives any
   * one token without a reconnect. (An older server sends no `expiresInMs`: nothing to schedule.)
   */
  private scheduleRefresh(expiresInMs: number | undefined): void {
    this.refreshTimer.cancel();
    if (typeof expiresInMs !== 'number' || !Number.isFinite(expiresInMs)) {
      this.expiresAt = Number.POSITIVE_INFINITY;
      return;
    }
    this.expiresAt = Date.now() + expiresInMs;
    const ahead = Math.min(expiresInMs * REFRESH_AHEAD_SHARE, REFRESH_AHEAD_MAX_MS);
    this.refreshTimer.arm(Math.min(Math.max(0, expiresInMs - ahead), MAX_TIMER_MS));
  }

  private async refresh(): Promise<void> {
    const generation = this.generation;
    let token: string;
    try {
      token = await this.options.token();
    } catch (err) {
      if (generation !== this.generation) return;
      this.hooks.error(asError(err));
      this.retryRefresh();
      return;
    }
    if (generation !== this.generation || !this.open || !this.socket) return;
    // A reconnect from now on starts with the newer token too.
    this.token = token;
    this.socket.send({ t: 'refresh', id: REFRESH_ID, token });
    this.deadlines.start(REFRESH_ID);
  }

  private refreshed(frame: ServerFrame): void {
    if (frame.t === 'refreshed') return this.scheduleRefresh(frame.expiresInMs);
    if (frame.t !== 'error') return;
    // The token was refused (or could not be checked): this socket keeps its current token
    // until it expires; the next attempt, or the reconnect after 4003, fetches another one.
    this.token = null;
    this.hooks.error(new Error(`token refresh refused: ${frame.code}: ${frame.message}`));
    this.retryRefresh();
  }

  /** Tries again halfway to the expiry while there is time; otherwise the 4003 close and reconnect take over. */
  private retryRefresh(): void {
    const left = this.expiresAt - Date.now();
    if (left > 1000) this.refreshTimer.rearm(Math.min(left / 2, 5000));
  }

  /** A request went unanswered: the socket is no good, whatever state it claims. */
  private broken(key: RequestKey): void {
    const what = key === 'hello' ? 'hello' : `request ${key}`;
    this.dropSocket(`${what} unanswered after ${this.options.requestTimeoutMs} ms`);
  }

  private dropSocket(why: string): void {
    this.hooks.error(new Error(`${why}: reconnecting`));
    this.generation += 1;
    this.socket?.close(REQUEST_TIMEOUT_CLOSE, 'request timeout');
    this.onClose(REQUEST_TIMEOUT_CLOSE, false);
  }

  private onClose(code: number, retryNow: boolean): void {
    const refusedHello = !this.welcomed && (code === UNAUTHORIZED || code === TOKEN_EXPIRED);
    this.socket = null;
    this.welcomed = false;
    this.heartbeat.cancel();
    this.deadlines.clear();
    this.refreshTimer.cancel();
    if (code === TOKEN_EXPIRED) this.token = null;
    // Only the server refusing a hello's token counts: a network failure says nothing about it.
    if (refusedHello) this.authFailures += 1;
    if (refusedHello && (code === UNAUTHORIZED || this.authFailures >= this.options.maxAuthFailures)) return this.giveUp(code);
    const reconnect = RECONNECT_BY_CODE.get(code) ?? true;
    if (!reconnect) {
      this.hooks.down(code, new ClosedError(`connection closed (close code ${code})`, code));
      this.stopped = true;
      this.setState('closed', code);
      return;
    }
    this.hooks.down(code, null);
    if (retryNow && !this.stopped) {
      void this.connect();
      return;
    }
    this.scheduleReconnect(code);
  }

  /** The server keeps refusing the tokens: stop, and report why until `restart()`. */
  private giveUp(code: number): void {
    const err = new AuthError(code, this.authFailures, this.refusal, code === TOKEN_EXPIRED ? 'token_expired' : 'unauthorized');
    this.stopped = true;
    this.token = null;
    this.hooks.down(code, err);
    this.setState('auth_failed', code);
  }

  private scheduleReconnect(code: number | undefined): void {
    if (this.stopped) return;
    this.setState('offline', code);
    this.retryTimer.rearm(this.options.backoff.next());
  }

  private setState(state: ConnectionState, closeCode: number | undefined): void {
    this.state = state;
    this.hooks.state(state, closeCode);
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
