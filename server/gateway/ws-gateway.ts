import type { Logger } from 'pino';
import type { Authenticator } from '../auth/tokens.js';
import type { WsOptions } from '../config.js';
import type { UserChange } from '../engine/notifications.js';
import type { Metrics } from '../metrics/metrics.js';
import type { SyncService } from '../sync/sync-service.js';
import { Fanout } from './fanout.js';
import { RollingSweep } from './rolling-sweep.js';
import type { UserBudgets } from './user-budget.js';
import { type HttpRequest, type HttpResponse, type TemplatedApp, uws } from './uws.js';
import { checkVersion } from './version-check.js';
import { type SessionHost, type Socket, type SocketData, WsSession } from './ws-session.js';

/** The version sweep turns its wheel this often; each user is checked once per `versionEverySeconds`. */
const SWEEP_TICK_MS = 250;
/** Version checks in flight at once (auto-pipelining batches them into few round trips). */
const SWEEP_CONCURRENCY = 64;

/**
 * WebSocket `/v1/ws`: the uWS endpoint and the registry of sessions (one `WsSession` per socket,
 * owning its state, handlers and timers). Owns what spans sessions: the per-user connection
 * limit, following large groups as memberships change, the spread-out safety-net version sweep,
 * and closing everyone on shutdown.
 */
export class WsGateway implements SessionHost {
  readonly fanout: Fanout;
  private readonly users = new Map<string, Set<WsSession>>();
  private readonly sessions = new Set<WsSession>();
  private readonly sweep: RollingSweep<string>;
  private closing = false;
  private readonly stopKeyWatch: () => void;
  /** Hears when this process's first socket of a user opens and its last one closes (the badge hook's socket-less rule, server/hook/presence.ts). */
  presence: { online(uid: string): void; offline(uid: string): void } | undefined;

  constructor(
    app: TemplatedApp,
    readonly sync: SyncService,
    readonly auth: Authenticator,
    readonly metrics: Metrics,
    readonly log: Logger,
    readonly options: WsOptions,
    readonly budgets: UserBudgets,
    /** The HTTP router's framing check (HttpRouter.refusedFraming): an upgrade request is no route of its. */
    refusedFraming: (res: HttpResponse, req: HttpRequest) => boolean,
  ) {
    this.fanout = new Fanout(
      app,
      sync.engine.notifications,
      metrics,
      { onUserChange: (c) => this.followMembership(c) },
      options.testDropPushRatio ?? 0,
      sync.receipts.pushIntervalMs,
    );
    this.sweep = new RollingSweep(options.versionEverySeconds * 1000, Math.min(SWEEP_TICK_MS, options.versionEverySeconds * 1000), SWEEP_CONCURRENCY, (uid) =>
      this.checkVersion(uid),
    );
    this.sweep.start();
    // A key dropped from the JWK Set (retired, or compromised) no longer vouches for anyone: the
    // sockets it opened fetch a new token (4003), as if theirs had expired.
    this.stopKeyWatch = auth.onKeysRemoved((kids) => {
      for (const session of this.sessions) if (session.kid !== undefined && kids.has(session.kid)) session.close('token_expired');
    });
    app.ws<SocketData>('/v1/ws', {
      maxPayloadLength: options.maxPayloadBytes,
      idleTimeout: options.idleTimeoutSeconds,
      sendPingsAutomatically: true,
      maxBackpressure: options.maxBackpressureBytes,
      closeOnBackpressureLimit: 0,
      compression: uws.DISABLED,
      upgrade: (res, req, context) => {
        if (refusedFraming(res, req)) return;
        const data: SocketData = { remote: Buffer.from(res.getRemoteAddressAsText()).toString(), session: undefined };
        res.upgrade(data, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
      },
      open: (ws) => this.onOpen(ws),
      message: (ws, message, isBinary) => ws.getUserData().session?.message(message, isBinary),
      drain: (ws) => ws.getUserData().session?.drained(),
      close: (ws) => this.onClose(ws),
    });
  }

  register(session: WsSession): void {
    const uid = session.uid;
    if (!uid) return;
    let mine = this.users.get(uid);
    if (!mine) {
      mine = new Set();
      this.users.set(uid, mine);
      this.sweep.add(uid);
      this.presence?.online(uid);
    }
    mine.add(session);
    if (mine.size > this.options.maxConnectionsPerUser) {
      const oldest = mine.values().next().value;
      oldest?.close('too_many_connections');
    }
  }

  unregister(session: WsSession): void {
    const uid = session.uid;
    if (!uid) return;
    const mine = this.users.get(uid);
    mine?.delete(session);
    if (mine?.size === 0) {
      this.users.delete(uid);
      this.sweep.delete(uid);
      this.presence?.offline(uid);
    }
  }

  /** The users this process holds a socket of. */
  liveUsers(): string[] {
    return [...this.users.keys()];
  }

  /** Online users and open connections of this process. */
  get counts(): { users: number; connections: number } {
    return { users: this.users.size, connections: this.sessions.size };
  }

  /** Stop accepting work and tell every client to reconnect elsewhere. */
  shutdown(): void {
    this.closing = true;
    this.sweep.stop();
    this.fanout.close();
    this.stopKeyWatch();
    this.budgets.close();
    for (const session of [...this.sessions]) session.close('going_away');
  }

  private onOpen(ws: Socket): void {
    const data = ws.getUserData();
    const session = new WsSession(ws, this, data.remote);
    data.session = session;
    this.sessions.add(session);
    this.metrics.connections.set(this.sessions.size);
    session.opened(this.closing);
  }

  private onClose(ws: Socket): void {
    const session = ws.getUserData().session;
    if (!session) return;
    this.sessions.delete(session);
    this.metrics.connections.set(this.sessions.size);
    session.ended();
  }

  /** Joins, leaves and mode switches arrive as user changes: follow large groups accordingly. */
  private followMembership(change: UserChange): void {
    const mine = this.users.get(change.uid);
    if (!mine) return;
    const follow = change.state?.large === true;
    for (const session of mine) void session.followConversation(change.conv, follow);
  }

  /** The safety net for one online user: every socket of the user hears the server's cursor. */
  private async checkVersion(uid: string): Promise<void> {
    const mine = this.users.get(uid);
    if (mine) await checkVersion(this.sync, this.log, uid, [...mine]);
  }
}
