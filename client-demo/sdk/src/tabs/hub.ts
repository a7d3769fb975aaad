import { LIMITS } from '../../../../protocol/limits.js';
import type { WireFrame } from '../codec.js';
import { REQUEST_TIMEOUT_CLOSE } from '../connection.js';
import type { FrameSocket, Transport } from '../transport.js';

/** A client's socket as the hub sees it: a port of this tab, or of a follower tab. */
export interface HubPort {
  readonly remote: boolean;
  deliver(frame: WireFrame): void;
  end(code: number, reason: string, retryNow: boolean): void;
}

interface Member {
  port: HubPort;
  welcomed: boolean;
}

/** Where a reply to a forwarded request goes: the port and its own request id (null: a hello answered by a pull). */
interface Route {
  key: string;
  id: number | null;
}

const NORMAL_CLOSURE = 1000;

/**
 * The leader tab's one real socket, shared by the clients of every tab (ports). To each port it
 * looks like a socket of its own:
 * - the first port's hello opens the socket; the welcome and the sync answering that hello are
 *   that port's. A later port's hello is answered with the same welcome and a `pull` from its
 *   own cursor, whose reply reaches it as the sync answering its hello;
 * - request ids are rewritten on the way out (each port counts its own) and back on the way in;
 * - pushes go to every welcomed port, in the socket's order;
 * - the socket's close ends every port with the server's close code, so each client reacts to
 *   it as to its own (4003 fetches a new token, 4002 stays closed, ...);
 * - a port that drops its socket because a request went unanswered (4000) proves the shared
 *   socket broken: the hub closes it, and every port reconnects.
 */
export class Hub {
  private readonly members = new Map<string, Member>();
  private socket: FrameSocket | null = null;
  private welcome: WireFrame | null = null;
  /** The port whose hello opened the socket. */
  private opener: string | null = null;
  /** Hellos waiting for the socket's welcome. */
  private greeting: Array<[string, WireFrame]> = [];
  private readonly routes = new Map<number, Route>();
  private nextId = 1;

  constructor(
    private readonly direct: Transport,
    /** Sends a push once to every follower tab (each hands it to its welcomed ports). */
    private readonly pushRemote: (frame: WireFrame) => void,
  ) {}

  attach(key: string, port: HubPort): void {
    this.members.set(key, { port, welcomed: false });
  }

  has(key: string): boolean {
    return this.members.has(key);
  }

  receive(key: string, frame: WireFrame): void {
    if (!this.members.has(key)) return;
    if (frame.t === 'hello') return this.hello(key, frame);
    const id = frame.id;
    if (typeof id !== 'number' || !this.welcome || !this.socket) return;
    const wire = this.wireId();
    this.routes.set(wire, { key, id });
    this.socket.send({ ...frame, id: wire });
  }

  /** The port closed its socket. */
  detach(key: string, code: number): void {
    if (!this.members.delete(key)) return;
    this.greeting = this.greeting.filter(([k]) => k !== key);
    if (this.opener === key) this.opener = null;
    for (const [wire, route] of this.routes) if (route.key === key) this.routes.delete(wire);
    if (code === REQUEST_TIMEOUT_CLOSE) this.shut(REQUEST_TIMEOUT_CLOSE, 'request timeout');
    else if (this.members.size === 0) this.shut(NORMAL_CLOSURE, 'no clients left');
  }

  /** Closes the socket and ends every port; `retryNow`: they reconnect at once (another tab leads now). */
  shut(code: number, reason: string, retryNow = false): void {
    this.socket?.close(code, reason);
    this.closed(code, reason, retryNow);
  }

  private hello(key: string, frame: WireFrame): void {
    if (this.welcome) return this.greet(key, frame);
    if (this.socket) {
      this.greeting.push([key, frame]);
      return;
    }
    this.opener = key;
    try {
      this.socket = this.direct({
        open: () => this.socket?.send(frame),
        frame: (f) => this.onFrame(f),
        closed: (code, reason) => this.closed(code, reason, false),
      });
    } catch (err) {
      this.closed(1006, err instanceof Error ? err.message : String(err), false);
    }
  }

  private greet(key: string, hello: WireFrame): void {
    if (!this.welcome || !this.socket) return;
    this.deliver(key, this.welcome);
    const wire = this.wireId();
    this.routes.set(wire, { key, id: null });
    const cursor = hello.cursor;
    this.socket.send({ t: 'pull', id: wire, ...(cursor ? { since: cursor } : {}) });
  }

  private onFrame(frame: WireFrame): void {
    if (frame.t === 'welcome') {
      this.welcome = frame;
      if (this.opener) this.deliver(this.opener, frame);
      for (const [key, hello] of this.greeting.splice(0)) this.greet(key, hello);
      return;
    }
    const { id, ...rest } = frame;
    if (typeof id === 'number') {
      const route = this.routes.get(id);
      if (!route) return;
      // The parts of a snapshot precede the sync that completes the reply, under the same id.
      if (frame.t !== 'sync-part') this.routes.delete(id);
      this.deliver(route.key, route.id === null ? { ...rest, t: frame.t } : { ...rest, t: frame.t, id: route.id });
      return;
    }
    // Before the welcome, an error without an id refuses the hello's token, which every waiting
    // port's hello rode on: each client reports the check that failed (its close follows).
    if (frame.t === 'error' && !this.welcome) {
      if (this.opener) this.deliver(this.opener, frame);
      for (const [key] of this.greeting) this.deliver(key, frame);
      return;
    }
    // Without an id, a sync or an error answers the socket's own hello.
    if (frame.t === 'sync' || frame.t === 'sync-part' || frame.t === 'error') {
      if (this.opener) this.deliver(this.opener, frame);
      return;
    }
    let followers = false;
    for (const member of this.members.values()) {
      if (!member.welcomed) continue;
      if (member.port.remote) followers = true;
      else member.port.deliver(frame);
    }
    if (followers) this.pushRemote(frame);
  }

  private deliver(key: string, frame: WireFrame): void {
    const member = this.members.get(key);
    if (!member) return;
    if (frame.t === 'welcome') member.welcomed = true;
    member.port.deliver(frame);
  }

  private closed(code: number, reason: string, retryNow: boolean): void {
    this.socket = null;
    this.welcome = null;
    this.opener = null;
    this.greeting = [];
    this.routes.clear();
    const members = [...this.members.values()];
    this.members.clear();
    for (const member of members) member.port.end(code, reason, retryNow);
  }

  private wireId(): number {
    const id = this.nextId;
    this.nextId = id + 1 >= LIMITS.requestIdMax ? 1 : id + 1;
    return id;
  }
}
