import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import { encodeMsgpack } from '../../protocol/codec.js';
import { RedpointError } from '../../protocol/errors.js';
import {
  CLOSE_CODES,
  type ClientFrame,
  type CloseReason,
  type FollowFrame,
  type HelloFrame,
  type PullFrame,
  type ReadFrame,
  type RefreshFrame,
  type ServerFrame,
  type SettingsFrame,
  type UnreadFromFrame,
  type UserSettingsFrame,
} from '../../protocol/frames.js';
import type { Cursor } from '../../protocol/types.js';
import type { Authenticator } from '../auth/tokens.js';
import type { WsOptions } from '../config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { SyncService } from '../sync/sync-service.js';
import { wireError } from './error-mapper.js';
import { convTopic, type Fanout, userTopic } from './fanout.js';
import { TokenBucket } from './rate-limiter.js';
import { splitSnapshot } from './snapshot-parts.js';
import { pullCost, RetryLaterError, type UserBudgets } from './user-budget.js';
import type { WebSocket } from './uws.js';
import { checkVersion } from './version-check.js';
import { FrameError, parseClientFrame } from './ws-frames.js';

/** What uWS keeps per socket: the session, set when the socket opens. */
export interface SocketData {
  remote: string;
  session: WsSession | undefined;
}

export type Socket = WebSocket<SocketData>;

/** What a session needs from the gateway that owns it. */
export interface SessionHost {
  readonly sync: SyncService;
  readonly auth: Authenticator;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly options: WsOptions;
  readonly fanout: Fanout;
  /** Per-user cost budgets, shared with the HTTP routes. */
  readonly budgets: UserBudgets;
  /** The session authenticated: register it under its user (may close an older one of the user). */
  register(session: WsSession): void;
  unregister(session: WsSession): void;
}

const MAX_MALFORMED = 10;
/** Requests of one connection being answered at once; more are refused with rate_limited. */
const MAX_REQUESTS_IN_FLIGHT = 16;
const DRAIN_CHECK_DELAY_MS = 100;
/** A close decided while the buffer is still over the limit waits this long for it to drain. */
const CLOSE_WAIT_MS = 10_000;
/** What a call with nothing to wait for returns: one settled promise, not a new one per call. */
const SETTLED: Promise<void> = Promise.resolve();

type Request = PullFrame | ReadFrame | SettingsFrame | RefreshFrame | UnreadFromFrame | FollowFrame | UserSettingsFrame;

/** The retry hint of a refusal for cost or rate, for the error frame. */
function retryAfter(e: Error): { retryAfterMs?: number } {
  return e instanceof RetryLaterError ? { retryAfterMs: e.retryAfterMs } : {};
}

/** setTimeout's longest delay; a token living longer is re-checked when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One WebSocket connection: its state, its handlers and its timers. Every request frame gets
 * exactly one reply or the connection is closed with a documented code — never a silent drop.
 * uWS silently drops a send once the socket buffers more than `maxBackpressure`, and then drops
 * the close frame too, so the decision is made before sending: a reply that would cross the
 * limit closes the connection with 4010 instead (while the close frame still fits).
 */
export class WsSession {
  readonly id = nanoid(10);
  uid: string | null = null;
  device = '';
  /** Format of the client's hello: replies and pushes use the same. */
  binary = false;
  /** Large groups this socket follows. */
  readonly convs = new Set<string>();
  private closed = false;
  /** Set by the first hello, synchronously: a second hello is refused, frames pipelined after it wait for it. */
  private hello: Promise<void> | undefined;
  private helloTimer: NodeJS.Timeout | undefined;
  private drainCheck: NodeJS.Timeout | undefined;
  /** A close waiting for the buffer to drain below the limit (so that its frame is not dropped). */
  private pendingClose: { reason: CloseReason; timer: NodeJS.Timeout } | undefined;
  private readonly bucket: TokenBucket;
  private malformed = 0;
  private inFlight = 0;
  /** When the socket's token stops being valid (`exp` plus the clock tolerance), in Date.now() ms. */
  private expiresAt = Number.POSITIVE_INFINITY;
  /** The JWK Set key that verified the current token (undefined: the shared secret). */
  private tokenKid: string | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** Refreshes are numbered as they arrive: one that finishes late never replaces a newer token. */
  private refreshesSeen = 0;
  private refreshApplied = 0;
  /** Snapshot parts waiting for the buffer to drain (woken by `drained`). */
  private readonly drainWaiters: Array<() => void> = [];

  constructor(
    private readonly ws: Socket,
    private readonly host: SessionHost,
    readonly remote: string,
  ) {
    const o = host.options;
    this.bucket = new TokenBucket(o.framesPerSecond, o.framesBurst, o.framesBurst);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The key that verified this socket's current token: a reload that drops it closes the socket. */
  get kid(): string | undefined {
    return this.tokenKid;
  }

  opened(closing: boolean): void {
    if (closing) return this.close('going_away');
    this.helloTimer = setTimeout(() => {
      if (!this.uid) this.close('hello_timeout');
    }, this.host.options.helloTimeoutMs);
  }

  message(message: ArrayBuffer, isBinary: boolean): void {
    if (this.closed || this.pendingClose) return;
    // The timer may run late on a busy process: nothing is served on an expired token meanwhile.
    if (this.uid && Date.now() >= this.expiresAt) return this.close('token_expired');
    const { metrics } = this.host;
    // The format is the hello's: frames pipelined after it (auth still pending) must not change it.
    if (!this.hello) this.binary = isBinary;
    // uWS neuters `message` after this callback returns: decode synchronously.
    const parsed = parseClientFrame(message, isBinary);
    const verdict = this.bucket.take();
    if (verdict === 'close') return this.close('rate_limited');
    if (verdict === 'refuse') {
      metrics.errors.inc({ code: 'rate_limited' });
      const id = parsed instanceof FrameError ? parsed.id : parsed.t === 'hello' ? undefined : parsed.id;
      return this.replyAfterHello({
        t: 'error',
        ...(id !== undefined ? { id } : {}),
        code: 'rate_limited',
        message: 'too many frames; slow down',
        retryAfterMs: this.bucket.retryAfterMs(),
      });
    }
    if (parsed instanceof FrameError) {
      metrics.errors.inc({ code: parsed.code });
      metrics.framesIn.inc({ type: 'invalid' });
      // A hello without a token is an authentication failure (4002), not a malformed frame.
      if (parsed.code === 'unauthorized') {
        if (this.hello) return this.close('protocol_error');
        return this.refuseHello(new RedpointError('unauthorized', parsed.message, 'missing'));
      }
      // A request with a usable id is a bad request, answered like any other: its client waits
      // on that id, and it is no sign of a broken framing (only frames without one count).
      if (parsed.id !== undefined) {
        if (!this.hello) return this.close('protocol_error');
        return this.replyAfterHello({ t: 'error', id: parsed.id, code: parsed.code, message: parsed.message });
      }
      this.malformed += 1;
      if (this.malformed >= MAX_MALFORMED) return this.close('protocol_error');
      return this.replyAfterHello({ t: 'error', code: parsed.code, message: parsed.message });
    }
    metrics.framesIn.inc({ type: parsed.t });
    void this.handle(parsed);
  }

  /**
   * An error for a frame sent after hello but before the welcome waits for the hello to settle,
   * as a request in that spot does: a client reads `welcome` first, then the replies in order.
   * A hello that fails closes the connection, and the error is not sent.
   */
  private replyAfterHello(frame: ServerFrame): void {
    if (!this.hello || this.uid) return this.reply(frame);
    const send = (): void => {
      if (this.uid && !this.closed) this.reply(frame);
    };
    this.hello.then(send, send);
  }

  /**
   * uWS calls drain only after backpressure built up, and while it was up, topic publishes may
   * have skipped this socket silently. So every drain schedules one version check (coalesced),
   * sent once the buffer is low: the client pulls if it missed anything. A close waiting for
   * the buffer goes out as soon as its frame fits.
   */
  drained(): void {
    for (const wake of this.drainWaiters.splice(0)) wake();
    if (this.pendingClose) {
      if (this.ws.getBufferedAmount() <= this.host.options.maxBackpressureBytes) this.close(this.pendingClose.reason);
      return;
    }
    if (!this.uid || this.drainCheck) return;
    this.drainCheck = setTimeout(() => {
      this.drainCheck = undefined;
      if (this.closed || !this.uid) return;
      if (this.ws.getBufferedAmount() > this.host.options.maxBackpressureBytes / 2) return; // the next drain retries
      void this.sendVersion();
    }, DRAIN_CHECK_DELAY_MS);
  }

  /** uWS closed the socket (either side): release everything. */
  ended(): void {
    this.closed = true;
    clearTimeout(this.helloTimer);
    clearTimeout(this.drainCheck);
    clearTimeout(this.pendingClose?.timer);
    clearTimeout(this.expiryTimer);
    for (const wake of this.drainWaiters.splice(0)) wake();
    for (const conv of this.convs) this.host.fanout.unfollowConversation(conv);
    this.convs.clear();
    if (this.uid) {
      this.host.fanout.unfollowUser(this.uid);
      this.host.unregister(this);
    }
  }

  close(reason: CloseReason): void {
    if (this.closed) return;
    const waiting = this.pendingClose;
    if (!waiting) {
      this.host.metrics.closes.inc({ reason });
      // Closes the client caused are worth a line (abuse, broken clients); shutdown closes are not.
      const level = reason === 'going_away' || reason === 'service_restart' ? 'debug' : 'info';
      this.host.log[level]({ conn: this.id, uid: this.uid, remote: this.remote, reason, code: CLOSE_CODES[reason].code }, 'closing connection');
    }
    if (this.ws.getBufferedAmount() > this.host.options.maxBackpressureBytes) {
      // uWS would drop the close frame now: wait for the buffer to drain (the client reads
      // everything before it, then the close), or give up on a client that never reads.
      if (waiting) return;
      const timer = setTimeout(() => {
        if (!this.closed) this.ws.close();
      }, CLOSE_WAIT_MS);
      this.pendingClose = { reason, timer };
      return;
    }
    this.closed = true;
    const { code } = CLOSE_CODES[waiting?.reason ?? reason];
    this.ws.end(code, waiting?.reason ?? reason);
  }

  /** A frame this connection must get: if it would cross the backpressure limit, close with 4010 instead. */
  reply(frame: ServerFrame): void {
    this.write(frame, true);
  }

  /** A frame the client can do without for now (version checks): skipped when the socket is congested. */
  offer(frame: ServerFrame): void {
    this.write(frame, false);
  }

  /** The safety net for this socket alone (version-check.ts). */
  async sendVersion(): Promise<void> {
    const uid = this.uid;
    if (!uid || this.closed) return;
    await checkVersion(this.host.sync, this.host.log, uid, [this], { conn: this.id });
  }

  /** Sends a version frame, preceded by the current head of each large group this socket follows. */
  deliverVersion(position: Cursor, heads: ReadonlyMap<string, number>): void {
    for (const conv of this.convs) {
      const lastSeq = heads.get(conv);
      if (lastSeq !== undefined) this.offer({ t: 'head', conv, lastSeq });
    }
    this.offer({ t: 'version', epoch: position.epoch, version: position.version });
  }

  /** Follows or leaves a large group's topic (joins, leaves and mode switches arrive as user changes). */
  /**
   * Not async: almost every push leaves the follow as it is (the gateway asks on each one), and an
   * async function would make a promise each time. Only a new follow has something to wait for.
   */
  followConversation(conv: string, follow: boolean): Promise<void> {
    if (this.closed || follow === this.convs.has(conv)) return SETTLED;
    const topic = convTopic(conv, this.binary);
    if (follow) {
      this.convs.add(conv);
      this.ws.subscribe(topic);
      return this.host.fanout.followConversation(conv);
    }
    this.convs.delete(conv);
    this.ws.unsubscribe(topic);
    this.host.fanout.unfollowConversation(conv);
    return SETTLED;
  }

  private write(frame: ServerFrame, required: boolean): void {
    if (this.closed || this.pendingClose) return;
    const limit = this.host.options.maxBackpressureBytes;
    const data = this.binary ? encodeMsgpack(frame) : JSON.stringify(frame);
    // Ids and codes are ASCII, so a JSON frame's length is its size in bytes (near enough).
    const size = typeof data === 'string' ? data.length : data.byteLength;
    const buffered = this.ws.getBufferedAmount();
    // A frame larger than the limit still goes out alone (a big snapshot), never on top of a backlog.
    if (buffered > 0 && buffered + size > limit) {
      if (required) this.close('slow_consumer');
      return;
    }
    this.ws.send(data, this.binary);
    this.host.metrics.frameCounts.add(frame.t);
  }

  private async handle(frame: ClientFrame): Promise<void> {
    if (frame.t === 'hello') {
      // Checked and set before any await: two hellos in a row must not both authenticate.
      if (this.hello) return this.close('protocol_error');
      // The client sent its hello in time; how long the server then takes is not its fault.
      clearTimeout(this.helloTimer);
      this.hello = this.authenticate(frame);
      return this.hello;
    }
    if (!this.hello) return this.close('protocol_error');
    if (this.inFlight >= MAX_REQUESTS_IN_FLIGHT) {
      this.host.metrics.errors.inc({ code: 'rate_limited' });
      return this.reply({ t: 'error', id: frame.id, code: 'rate_limited', message: `more than ${MAX_REQUESTS_IN_FLIGHT} requests in flight` });
    }
    this.inFlight += 1;
    try {
      // A frame sent right after hello (not waiting for welcome) is answered once hello is done.
      if (!this.uid) await this.hello;
      const uid = this.uid;
      if (!uid || this.closed) return;
      await this.answer(uid, frame);
    } catch (err) {
      this.failed(
        err,
        frame.id,
        frame.t === 'read' || frame.t === 'settings' || frame.t === 'unread-from' || frame.t === 'follow' || frame.t === 'user-settings',
      );
    } finally {
      this.inFlight -= 1;
    }
  }

  private async answer(uid: string, frame: Request): Promise<void> {
    switch (frame.t) {
      case 'pull':
        return this.sendPage(uid, frame.since ?? null, frame.limit, frame.id);
      case 'read': {
        const result = await this.host.sync.readBatch(uid, frame.reads);
        return this.reply({
          t: 'ack',
          id: frame.id,
          epoch: result.epoch,
          version: result.version,
          ...(result.rejected.length > 0 ? { rejected: result.rejected } : {}),
        });
      }
      case 'refresh':
        return this.refresh(uid, frame);
      case 'settings': {
        if (frame.deleted === undefined && frame.muted === undefined && frame.markedUnread === undefined && frame.level === undefined) {
          throw new RedpointError('invalid_request', 'settings: nothing to change');
        }
        const result = await this.host.sync.updateSettings(uid, frame.conv, {
          ...(frame.muted !== undefined ? { muted: frame.muted } : {}),
          ...(frame.level !== undefined ? { level: frame.level } : {}),
          ...(frame.markedUnread !== undefined ? { markedUnread: frame.markedUnread } : {}),
          ...(frame.deleted ? { deleted: true } : {}),
        });
        return this.reply({ t: 'ack', id: frame.id, epoch: result.epoch, version: result.version });
      }
      case 'unread-from': {
        const result = await this.host.sync.unreadFrom(uid, frame.conv, frame.seq, frame.gen);
        return this.reply({ t: 'ack', id: frame.id, epoch: result.epoch, version: result.version });
      }
      case 'follow': {
        // The thread's row comes as any row's change; the ack carries the position after it.
        if (frame.unfollow) await this.host.sync.unfollowThread(uid, frame.conv, frame.root);
        else await this.host.sync.followThread(uid, frame.conv, frame.root);
        const position = await this.host.sync.position(uid);
        return this.reply({ t: 'ack', id: frame.id, epoch: position.epoch, version: position.version });
      }
      case 'user-settings': {
        // As PUT /v1/users/:uid/settings; a mutedMentions change moves the stream (a new epoch).
        await this.host.sync.setUserSettings(uid, frame);
        const position = await this.host.sync.position(uid);
        return this.reply({ t: 'ack', id: frame.id, epoch: position.epoch, version: position.version });
      }
    }
  }

  /**
   * The socket moves to the new token (its expiry and key) if it verifies and names the same
   * user; otherwise the error goes back with the id and the socket stays on its current token.
   */
  private async refresh(uid: string, frame: RefreshFrame): Promise<void> {
    const seen = ++this.refreshesSeen;
    const verified = await this.host.auth.verifyUser(frame.token);
    if (verified.uid !== uid) throw new RedpointError('forbidden', 'a refresh token must be for the user of the connection');
    if (this.closed) return;
    if (seen > this.refreshApplied) {
      this.refreshApplied = seen;
      this.holdToken(verified.exp, verified.kid);
    }
    this.reply({ t: 'refreshed', id: frame.id, expiresInMs: this.expiresInMs() });
  }

  /** From now on the socket is served until `exp` (plus the clock tolerance), then closed 4003. */
  private holdToken(exp: number, kid: string | undefined): void {
    this.expiresAt = (exp + this.host.auth.clockToleranceSeconds) * 1000;
    this.tokenKid = kid;
    this.armExpiry();
  }

  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    const left = this.expiresAt - Date.now();
    if (left <= 0) return this.close('token_expired');
    this.expiryTimer = setTimeout(() => this.armExpiry(), Math.min(left, MAX_TIMER_MS));
  }

  private expiresInMs(): number {
    return Math.max(0, Math.floor(this.expiresAt - Date.now()));
  }

  private failed(err: unknown, id: number | undefined, write: boolean): void {
    const e = wireError(err, { write, transport: 'ws', log: this.host.log, metrics: this.host.metrics, fields: { conn: this.id } });
    this.reply({
      t: 'error',
      ...(id !== undefined ? { id } : {}),
      code: e.code,
      message: e.message,
      ...(e.check !== undefined ? { check: e.check } : {}),
      ...retryAfter(e),
    });
  }

  private async authenticate(frame: HelloFrame): Promise<void> {
    const { auth, metrics, options, fanout, log } = this.host;
    let uid: string;
    try {
      const verified = await auth.verifyUserOnly(frame.token, 'the WebSocket hello');
      uid = verified.uid;
      if (!this.closed) this.holdToken(verified.exp, verified.kid);
    } catch (err) {
      return this.refuseHello(err);
    }
    if (this.closed) return;
    this.uid = uid;
    this.device = frame.device ?? this.id;
    this.host.register(this);
    log.debug({ conn: this.id, uid, device: this.device, remote: this.remote }, 'connection authenticated');
    // The first sync is read only once the store's notifications reach us: nothing published
    // after it can be missed.
    this.ws.subscribe(userTopic(uid, this.binary));
    await fanout.followUser(uid);
    if (this.closed) return;
    this.reply({ t: 'welcome', uid, connId: this.id, versionEvery: options.versionEverySeconds, expiresInMs: this.expiresInMs() });
    try {
      await this.sendPage(uid, frame.cursor ?? null, undefined, undefined);
    } catch (err) {
      // The one request without an id: an error without id before the first sync says the
      // hello's sync failed, and the client pulls.
      const e = wireError(err, { write: false, transport: 'ws', log, metrics, fields: { conn: this.id, frame: 'hello' } });
      this.reply({ t: 'error', code: e.code, message: 'initial sync failed; pull to retry', ...retryAfter(e) });
    }
  }

  /**
   * The hello's token is refused: an `error` frame (no id) naming the check that failed goes out
   * first, then the close code a client acts on (its reason text is only the code's name).
   */
  private refuseHello(err: unknown): void {
    const e = err instanceof RedpointError ? err : new RedpointError('unauthorized', 'the token cannot be verified');
    // The token is not wrong when the server cannot check it now (a JWK Set not loaded yet).
    const reason = e.code === 'token_expired' ? 'token_expired' : e.code === 'unavailable' ? 'try_again_later' : 'unauthorized';
    this.host.metrics.errors.inc({ code: reason === 'try_again_later' ? 'unavailable' : reason });
    if (this.closed) return;
    this.reply({
      t: 'error',
      code: reason === 'try_again_later' ? 'unavailable' : e.code,
      message: e.message,
      ...(e.check !== undefined ? { check: e.check } : {}),
    });
    this.close(reason);
  }

  private async sendPage(uid: string, since: Cursor | null, limit: number | undefined, id: number | undefined): Promise<void> {
    const { sync, metrics, budgets } = this.host;
    // Charged to the user before the store is asked: a user over budget costs nothing more.
    const ticket = budgets.admit(uid, since ? 'delta' : 'snapshot');
    let cost: number | undefined;
    let reply: Awaited<ReturnType<SyncService['pull']>>;
    try {
      reply = await sync.pull(uid, since, limit);
      cost = pullCost(reply);
    } finally {
      budgets.settle(ticket, cost);
    }
    metrics.pulls.inc({ kind: reply.snapshot ? 'snapshot' : 'delta', transport: 'ws' });
    metrics.streamLength.observe(reply.entries.length);
    // Follow before sending, so no head published after this reply can be missed.
    await Promise.all(Object.keys(reply.heads).map((conv) => this.followConversation(conv, true)));
    const tag = id !== undefined ? { id } : {};
    const { parts, last } = splitSnapshot(reply);
    for (const convs of parts) {
      // Between parts other sockets are served, and this one's buffer drains (a client that
      // reads slowly gets its snapshot slowly, not a 4010 for a reply it asked for).
      if (!(await this.roomForPart())) return;
      this.reply({ t: 'sync-part', ...tag, epoch: reply.epoch, v: last.snapshot?.v ?? 0, convs });
    }
    if (parts.length > 0 && !(await this.roomForPart())) return;
    this.reply({ t: 'sync', ...tag, ...last });
  }

  /**
   * Waits a turn of the event loop, then until the socket's buffer is at most half the limit
   * (drain events). False when the socket closed meanwhile, or never drained within
   * CLOSE_WAIT_MS (closed 4010 then: the client does not read).
   */
  private async roomForPart(): Promise<boolean> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    const low = this.host.options.maxBackpressureBytes / 2;
    const deadline = Date.now() + CLOSE_WAIT_MS;
    while (!this.closed && !this.pendingClose && this.ws.getBufferedAmount() > low) {
      if (Date.now() >= deadline) {
        this.close('slow_consumer');
        return false;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, DRAIN_CHECK_DELAY_MS);
        this.drainWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return !this.closed && !this.pendingClose;
  }
}
