import type { Logger } from 'pino';
import { nanoid } from 'nanoid';
import { encodeMsgpack } from '../../protocol/codec.js';
import { RedpointError } from '../../protocol/errors.js';
import { CLOSE_CODES, type CloseReason, type ServerFrame, type VersionFrame } from '../../protocol/frames.js';
import type { Authenticator } from '../auth/tokens.js';
import type { WsOptions } from '../config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Bus } from '../pubsub/bus.js';
import type { UserChange } from '../sync/events.js';
import type { SyncService } from '../sync/sync-service.js';
import { Fanout, convChannel, topicFor, userChannel } from './fanout.js';
import { TokenBucket } from './rate-limiter.js';
import { parseClientFrame } from './ws-frames.js';
import { handleFrame } from './ws-handlers.js';
import { uws, type TemplatedApp, type WebSocket } from './uws.js';

/** Per-socket state, kept in uWS user data (never a monkey-patched socket). */
export interface Conn {
  id: string;
  remote: string;
  uid: string | null;
  /** Set by the first hello, synchronously: a second hello is refused, frames pipelined after it wait for it. */
  hello: Promise<void> | undefined;
  device: string;
  /** Format of the client's hello: replies and pushes use the same. */
  binary: boolean;
  helloTimer: NodeJS.Timeout | undefined;
  bucket: TokenBucket;
  malformed: number;
  /** Large-group channels this socket is subscribed to. */
  convs: Set<string>;
  closed: boolean;
  /** A version check is scheduled after backpressure drained (publishes may have skipped the socket). */
  drainCheck: NodeJS.Timeout | undefined;
}

export type Socket = WebSocket<Conn>;

const HARD_BACKPRESSURE_FACTOR = 16;
const MAX_MALFORMED = 10;
const DRAIN_CHECK_DELAY_MS = 100;

/**
 * WebSocket `/v1/ws`: hello with a JWT, then pull / read / settings, with pushes from the fanout.
 * Owns connection hygiene: hello deadline, rate limit, backpressure, per-user connection limit,
 * idle pings (uWS), the periodic version frame, and draining on shutdown.
 */
export class WsGateway {
  readonly fanout: Fanout;
  private readonly users = new Map<string, Set<Socket>>();
  private readonly sockets = new Set<Socket>();
  private readonly versionTimer: NodeJS.Timeout;
  private closing = false;

  constructor(
    app: TemplatedApp,
    bus: Bus | null,
    readonly sync: SyncService,
    private readonly auth: Authenticator,
    readonly metrics: Metrics,
    readonly log: Logger,
    readonly options: WsOptions,
  ) {
    this.fanout = new Fanout(app, bus, metrics, { onUserChange: (c) => this.followMembership(c) }, sync.events, options.testDropPushRatio ?? 0);
    app.ws<Conn>('/v1/ws', {
      maxPayloadLength: options.maxPayloadBytes,
      idleTimeout: options.idleTimeoutSeconds,
      sendPingsAutomatically: true,
      maxBackpressure: options.maxBackpressureBytes,
      closeOnBackpressureLimit: 0,
      compression: uws.DISABLED,
      upgrade: (res, req, context) => {
        const remote = Buffer.from(res.getRemoteAddressAsText()).toString();
        const conn: Conn = {
          id: nanoid(10),
          remote,
          uid: null,
          hello: undefined,
          device: '',
          binary: false,
          helloTimer: undefined,
          bucket: new TokenBucket(options.framesPerSecond, options.framesBurst, options.framesBurst),
          malformed: 0,
          convs: new Set(),
          closed: false,
          drainCheck: undefined,
        };
        res.upgrade(conn, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
      },
      open: (ws) => this.onOpen(ws),
      message: (ws, message, isBinary) => this.onMessage(ws, message, isBinary),
      drain: (ws) => this.onDrain(ws),
      close: (ws) => this.onClose(ws),
    });
    this.versionTimer = setInterval(() => void this.sendVersions(), options.versionEverySeconds * 1000);
    this.versionTimer.unref();
  }

  send(ws: Socket, frame: ServerFrame): void {
    const conn = ws.getUserData();
    if (conn.closed) return;
    const status = conn.binary ? ws.send(encodeMsgpack(frame), true) : ws.send(JSON.stringify(frame), false);
    this.metrics.framesOut.inc({ type: frame.t });
    if (ws.getBufferedAmount() > this.options.maxBackpressureBytes * HARD_BACKPRESSURE_FACTOR) this.close(ws, 'slow_consumer');
  }

  close(ws: Socket, reason: CloseReason): void {
    const conn = ws.getUserData();
    if (conn.closed) return;
    this.metrics.closes.inc({ reason });
    const { code } = CLOSE_CODES[reason];
    // Closes the client caused are worth a line (abuse, broken clients); shutdown closes are not.
    const level = reason === 'going_away' || reason === 'service_restart' ? 'debug' : 'info';
    this.log[level]({ conn: conn.id, uid: conn.uid, remote: conn.remote, reason, code }, 'closing connection');
    ws.end(code, reason);
  }

  /** Called once hello verified: registers the socket under its user and subscribes its topics. */
  async authenticate(ws: Socket, token: string, device: string | undefined): Promise<string> {
    const uid = await this.auth.verifyUserToken(token);
    const conn = ws.getUserData();
    if (conn.closed) return uid;
    clearTimeout(conn.helloTimer);
    conn.uid = uid;
    conn.device = device ?? conn.id;
    let mine = this.users.get(uid);
    if (!mine) {
      mine = new Set();
      this.users.set(uid, mine);
    }
    mine.add(ws);
    if (mine.size > this.options.maxConnectionsPerUser) {
      const oldest = mine.values().next().value;
      if (oldest) this.close(oldest, 'too_many_connections');
    }
    this.log.debug({ conn: conn.id, uid, device: conn.device, remote: conn.remote }, 'connection authenticated');
    // The first sync is read only once the bus listens: nothing published after it can be missed.
    await this.subscribe(ws, userChannel(uid));
    return uid;
  }

  /** Subscribes a socket to the large groups named in a pull reply's heads. */
  async followHeads(ws: Socket, heads: Readonly<Record<string, number>>): Promise<void> {
    await Promise.all(Object.keys(heads).map((conv) => this.followConv(ws, conv, true)));
  }

  /** Stop accepting work and tell every client to reconnect elsewhere. */
  shutdown(): void {
    this.closing = true;
    clearInterval(this.versionTimer);
    for (const ws of [...this.sockets]) this.close(ws, 'going_away');
  }

  private onOpen(ws: Socket): void {
    const conn = ws.getUserData();
    this.sockets.add(ws);
    this.metrics.connections.set(this.sockets.size);
    if (this.closing) {
      this.close(ws, 'going_away');
      return;
    }
    conn.helloTimer = setTimeout(() => {
      if (!conn.uid) this.close(ws, 'hello_timeout');
    }, this.options.helloTimeoutMs);
  }

  private onMessage(ws: Socket, message: ArrayBuffer, isBinary: boolean): void {
    const conn = ws.getUserData();
    const verdict = conn.bucket.take();
    if (verdict === 'close') return this.close(ws, 'rate_limited');
    if (verdict === 'refuse') {
      this.metrics.errors.inc({ code: 'rate_limited' });
      return this.send(ws, { t: 'error', code: 'rate_limited', message: 'too many frames; slow down' });
    }
    // The format is the hello's: frames pipelined after it (auth still pending) must not change it.
    if (!conn.hello) conn.binary = isBinary;
    // uWS neuters `message` after this callback returns: decode synchronously.
    const parsed = parseClientFrame(message, isBinary);
    if (parsed instanceof RedpointError) {
      this.metrics.errors.inc({ code: parsed.code });
      this.metrics.framesIn.inc({ type: 'invalid' });
      // A hello without a token is an authentication failure (4002), not a malformed frame.
      if (parsed.code === 'unauthorized') return this.close(ws, conn.hello ? 'protocol_error' : 'unauthorized');
      conn.malformed += 1;
      if (conn.malformed >= MAX_MALFORMED) return this.close(ws, 'protocol_error');
      return this.send(ws, { t: 'error', code: parsed.code, message: parsed.message });
    }
    this.metrics.framesIn.inc({ type: parsed.t });
    void handleFrame(this, ws, parsed);
  }

  /**
   * uWS calls drain only after backpressure built up, and while it was up, topic publishes may
   * have skipped this socket silently. So every drain schedules one version check (coalesced),
   * sent once the buffer is low: the client pulls if it missed anything.
   */
  private onDrain(ws: Socket): void {
    const conn = ws.getUserData();
    if (!conn.uid || conn.drainCheck) return;
    conn.drainCheck = setTimeout(() => {
      conn.drainCheck = undefined;
      if (conn.closed || !conn.uid) return;
      if (ws.getBufferedAmount() > this.options.maxBackpressureBytes / 2) return; // the next drain retries
      void this.sendVersion([ws], conn.uid);
    }, DRAIN_CHECK_DELAY_MS);
  }

  private onClose(ws: Socket): void {
    const conn = ws.getUserData();
    conn.closed = true;
    clearTimeout(conn.helloTimer);
    clearTimeout(conn.drainCheck);
    this.sockets.delete(ws);
    this.metrics.connections.set(this.sockets.size);
    for (const conv of conn.convs) this.fanout.release(convChannel(conv));
    conn.convs.clear();
    if (!conn.uid) return;
    this.fanout.release(userChannel(conn.uid));
    const mine = this.users.get(conn.uid);
    mine?.delete(ws);
    if (mine?.size === 0) this.users.delete(conn.uid);
  }

  private subscribe(ws: Socket, channel: string): Promise<void> {
    ws.subscribe(topicFor(channel, ws.getUserData().binary));
    return this.fanout.retain(channel);
  }

  private async followConv(ws: Socket, conv: string, follow: boolean): Promise<void> {
    const conn = ws.getUserData();
    if (conn.closed || follow === conn.convs.has(conv)) return;
    const topic = topicFor(convChannel(conv), conn.binary);
    if (follow) {
      conn.convs.add(conv);
      ws.subscribe(topic);
      await this.fanout.retain(convChannel(conv));
    } else {
      conn.convs.delete(conv);
      ws.unsubscribe(topic);
      this.fanout.release(convChannel(conv));
    }
  }

  /** Joins, leaves and mode switches arrive as user changes: follow large groups accordingly. */
  private followMembership(change: UserChange): void {
    const mine = this.users.get(change.uid);
    if (!mine) return;
    const follow = change.state?.large === true;
    for (const ws of mine) void this.followConv(ws, change.conv, follow);
  }

  /** The safety net: each online user's sockets hear the server's cursor now and then. */
  private async sendVersions(): Promise<void> {
    await Promise.all([...this.users].map(([uid, sockets]) => this.sendVersion([...sockets], uid)));
  }

  private async sendVersion(sockets: Socket[], uid: string): Promise<void> {
    try {
      // A large group's head is not in the user's stream, so the version cannot reveal a lost head
      // push: the check repeats the current head of each large group the socket follows.
      const convs = [...new Set(sockets.flatMap((ws) => [...ws.getUserData().convs]))];
      const noHeads: Record<string, number> = {};
      const [position, heads] = await Promise.all([this.sync.position(uid), convs.length > 0 ? this.sync.engine.heads(convs) : noHeads]);
      const frame: VersionFrame = { t: 'version', epoch: position.epoch, version: position.version };
      for (const ws of sockets) {
        for (const conv of ws.getUserData().convs) {
          const lastSeq = heads[conv];
          if (lastSeq !== undefined) this.send(ws, { t: 'head', conv, lastSeq });
        }
        this.send(ws, frame);
      }
    } catch (err) {
      this.log.warn({ err, uid }, 'version check failed');
    }
  }
}
