import { CLOSE_CODES } from '../../protocol/close-codes.js';
import type { ClientFrame, HelloFrame, ServerFrame, WelcomeFrame } from '../../protocol/frames.js';
import type { Backoff } from './backoff.js';
import { Timer, type Timers } from './timers.js';
import { OPEN, decodeFrame, encodeFrame, type WebSocketConstructor, type WebSocketLike } from './socket.js';
import type { ConnectionState } from './types.js';

export interface ConnectionOptions {
  url: string;
  token: () => Promise<string>;
  WebSocket: WebSocketConstructor;
  binary: boolean;
  timers: Timers;
  backoff: Backoff;
  /** Give up on a socket that opened but got no welcome in this long, and reconnect. */
  welcomeTimeoutMs: number;
}

export interface ConnectionHooks {
  /** The hello to send on each new socket (token added here). */
  hello(): Omit<HelloFrame, 't' | 'token'>;
  welcomed(welcome: WelcomeFrame): void;
  frame(frame: ServerFrame): void;
  /** The socket is gone; `reconnect` false means the client stays closed. */
  down(code: number, reconnect: boolean): void;
  state(state: ConnectionState, closeCode: number | undefined): void;
  error(err: Error): void;
}

const RECONNECT_BY_CODE = new Map<number, boolean>(Object.values(CLOSE_CODES).map((c) => [c.code, c.reconnect]));
const TOKEN_EXPIRED = CLOSE_CODES.token_expired.code;
const NORMAL_CLOSURE = 1000;

/**
 * One logical connection over successive sockets: fetches (and caches) the token, says hello,
 * and reconnects with backoff unless the server's close code says not to (CLOSE_CODES in
 * protocol/close-codes.ts). 4003 drops the cached token, so the next attempt fetches a fresh one.
 */
export class Connection {
  state: ConnectionState = 'idle';
  private socket: WebSocketLike | null = null;
  private welcomed = false;
  private token: string | null = null;
  /** Bumped per socket: events of an older socket are ignored. */
  private generation = 0;
  private stopped = false;
  private readonly retryTimer: Timer;
  private readonly welcomeTimer: Timer;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly hooks: ConnectionHooks,
  ) {
    this.retryTimer = new Timer(options.timers, () => void this.connect());
    this.welcomeTimer = new Timer(options.timers, () => this.socket?.close(4000, 'no welcome'));
  }

  get open(): boolean {
    return this.welcomed && this.socket?.readyState === OPEN;
  }

  start(): void {
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.retryTimer.cancel();
    this.welcomeTimer.cancel();
    this.generation += 1;
    const socket = this.socket;
    this.socket = null;
    this.welcomed = false;
    socket?.close(NORMAL_CLOSURE, 'client stopped');
    this.setState('closed', undefined);
  }

  /** Skip the rest of the backoff (the page became visible, the network came back). */
  reconnectNow(): void {
    if (this.stopped || this.state !== 'offline') return;
    this.retryTimer.cancel();
    void this.connect();
  }

  /** Sends on the welcomed socket; false when there is none (the caller keeps the work for later). */
  send(frame: ClientFrame): boolean {
    if (!this.open || !this.socket) return false;
    this.socket.send(encodeFrame(frame, this.options.binary));
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
      this.hooks.error(err instanceof Error ? err : new Error(String(err)));
      this.scheduleReconnect(undefined);
      return;
    }
    if (generation !== this.generation) return;
    this.token = token;
    let socket: WebSocketLike;
    try {
      socket = new this.options.WebSocket(this.options.url);
    } catch (err) {
      this.hooks.error(err instanceof Error ? err : new Error(String(err)));
      this.scheduleReconnect(undefined);
      return;
    }
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    this.welcomed = false;
    socket.onopen = () => {
      if (generation !== this.generation) return;
      socket.send(encodeFrame({ t: 'hello', token, ...this.hooks.hello() }, this.options.binary));
      this.welcomeTimer.rearm(this.options.welcomeTimeoutMs);
    };
    socket.onmessage = (event) => {
      if (generation !== this.generation) return;
      const frame = decodeFrame(event.data);
      if (!frame) return;
      if (frame.t === 'welcome') {
        this.welcomeTimer.cancel();
        this.welcomed = true;
        this.setState('open', undefined);
        this.hooks.welcomed(frame);
        return;
      }
      this.hooks.frame(frame);
    };
    socket.onclose = (event) => {
      if (generation !== this.generation) return;
      this.onClose(event.code);
    };
    // Errors are always followed by a close event, which carries what the client acts on.
    socket.onerror = () => undefined;
  }

  private onClose(code: number): void {
    this.socket = null;
    this.welcomed = false;
    this.welcomeTimer.cancel();
    if (code === TOKEN_EXPIRED) this.token = null;
    const reconnect = RECONNECT_BY_CODE.get(code) ?? true;
    this.hooks.down(code, reconnect);
    if (!reconnect) {
      this.stopped = true;
      this.setState('closed', code);
      return;
    }
    this.scheduleReconnect(code);
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
