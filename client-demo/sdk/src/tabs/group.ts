import type { WireFrame } from '../codec.js';
import type { FrameSocket, SocketEvents, Transport } from '../transport.js';
import { Hub, type HubPort } from './hub.js';

/** The Web Locks API, as far as used here (structural, so the SDK also builds without DOM types). */
export interface LockManagerLike {
  request(name: string, options: { ifAvailable?: boolean }, callback: (lock: unknown) => Promise<unknown>): Promise<unknown>;
}

type Handler<E> = { bivarianceHack(event: E): void }['bivarianceHack'];

export interface ChannelLike {
  postMessage(message: unknown): void;
  onmessage: Handler<{ data: unknown }> | null;
}

export type ChannelConstructor = new (name: string) => ChannelLike;

/** Messages between the tabs of one group, on its BroadcastChannel. */
type TabMessage =
  | { type: 'who' }
  | { type: 'leader'; leader: string }
  /** A follower's port → the leader's hub. */
  | { type: 'port-frame'; to: string; tab: string; port: number; frame: WireFrame }
  | { type: 'port-closed'; to: string; tab: string; port: number; code: number }
  /** The leader → one follower port. */
  | { type: 'frame'; from: string; tab: string; port: number; frame: WireFrame }
  | { type: 'close'; from: string; tab: string; port: number; code: number; reason: string; retryNow: boolean }
  /** The leader → every welcomed follower port. */
  | { type: 'push'; from: string; frame: WireFrame };

interface LocalPort {
  readonly id: number;
  readonly events: SocketEvents;
  /** The tab whose hub carries this port (this tab's id when it leads); null until a leader is known. */
  leader: string | null;
  welcomed: boolean;
}

const GOING_AWAY = 1001;
const HOLD_FOREVER = (): Promise<never> => new Promise<never>(() => undefined);

/**
 * The tabs of one browser (one storage partition) that share a key, e.g. one signed-in user.
 * The tab holding the Web Lock `redpoint:<key>` leads: its hub owns the one WebSocket. The others
 * follow: their clients' sockets are ports whose frames travel over a BroadcastChannel to the
 * leader and back. When the leader's tab closes, the browser releases the lock, the next tab in
 * the lock's queue takes it and says so, and every port reconnects at once through it: a
 * reconnect that says hello with its cursor, which is a pull.
 */
export class TabGroup {
  private readonly tab = randomId();
  private readonly lockName: string;
  private readonly channel: ChannelLike;
  private leader: string | null = null;
  private hub: Hub | null = null;
  private readonly ports = new Map<number, LocalPort>();
  private nextPort = 1;

  constructor(
    key: string,
    private readonly direct: Transport,
    private readonly locks: LockManagerLike,
    Channel: ChannelConstructor,
  ) {
    this.lockName = `redpoint:${key}`;
    this.channel = new Channel(`redpoint:${key}`);
    this.channel.onmessage = (event) => this.onMessage(event.data as TabMessage);
    void this.elect();
  }

  /** A socket for one client of this tab. */
  open(events: SocketEvents): FrameSocket {
    const port: LocalPort = { id: this.nextPort++, events, leader: null, welcomed: false };
    this.ports.set(port.id, port);
    if (this.leader) this.attach(port);
    return {
      send: (frame) => this.send(port, frame),
      close: (code) => this.closePort(port, code),
    };
  }

  /**
   * The page is going away: the leader learns that this tab's ports are gone, and this tab's
   * clients that their sockets are (should the page come back from the back-forward cache,
   * they reconnect).
   */
  leave(): void {
    for (const port of [...this.ports.values()]) {
      this.closePort(port, GOING_AWAY);
      port.events.closed(GOING_AWAY, 'page hidden');
    }
  }

  private async elect(): Promise<void> {
    await this.locks.request(this.lockName, { ifAvailable: true }, async (lock) => {
      if (lock) return this.lead();
      this.post({ type: 'who' });
      // Queued: granted when the leader's tab closes (the browser releases its lock).
      void this.locks.request(this.lockName, {}, () => this.lead());
      return undefined;
    });
  }

  private lead(): Promise<never> {
    this.hub = new Hub(this.direct, (frame) => this.post({ type: 'push', from: this.tab, frame }));
    this.follow(this.tab);
    this.post({ type: 'leader', leader: this.tab });
    return HOLD_FOREVER();
  }

  /** `leader` leads from now on: ports carried by another tab reconnect through it, waiting ones attach. */
  private follow(leader: string): void {
    if (this.leader === leader) return;
    this.leader = leader;
    for (const port of [...this.ports.values()]) {
      if (port.leader === null) this.attach(port);
      else if (port.leader !== leader) this.end(port, GOING_AWAY, 'another tab leads now', true);
    }
  }

  private attach(port: LocalPort): void {
    const leader = this.leader;
    if (!leader) return;
    port.leader = leader;
    if (leader === this.tab) this.hub?.attach(this.key(this.tab, port.id), this.localHubPort(port));
    // Like a WebSocket: `open` comes after the constructor returned.
    queueMicrotask(() => {
      if (this.ports.get(port.id) === port && port.leader === leader) port.events.open();
    });
  }

  private send(port: LocalPort, frame: WireFrame): void {
    if (!port.leader || this.ports.get(port.id) !== port) return;
    if (port.leader === this.tab) this.hub?.receive(this.key(this.tab, port.id), frame);
    else this.post({ type: 'port-frame', to: port.leader, tab: this.tab, port: port.id, frame });
  }

  private closePort(port: LocalPort, code: number): void {
    if (this.ports.get(port.id) !== port) return;
    this.ports.delete(port.id);
    if (port.leader === this.tab) this.hub?.detach(this.key(this.tab, port.id), code);
    else if (port.leader) this.post({ type: 'port-closed', to: port.leader, tab: this.tab, port: port.id, code });
  }

  private end(port: LocalPort, code: number, reason: string, retryNow: boolean): void {
    if (this.ports.get(port.id) !== port) return;
    this.ports.delete(port.id);
    port.events.closed(code, reason, retryNow);
  }

  private deliver(port: LocalPort, frame: WireFrame): void {
    if (this.ports.get(port.id) !== port) return;
    if (frame.t === 'welcome') port.welcomed = true;
    port.events.frame(frame);
  }

  private localHubPort(port: LocalPort): HubPort {
    return {
      remote: false,
      deliver: (frame) => this.deliver(port, frame),
      end: (code, reason, retryNow) => this.end(port, code, reason, retryNow),
    };
  }

  private remoteHubPort(tab: string, port: number): HubPort {
    return {
      remote: true,
      deliver: (frame) => this.post({ type: 'frame', from: this.tab, tab, port, frame }),
      end: (code, reason, retryNow) => this.post({ type: 'close', from: this.tab, tab, port, code, reason, retryNow }),
    };
  }

  private onMessage(message: TabMessage): void {
    switch (message.type) {
      case 'who':
        if (this.hub) this.post({ type: 'leader', leader: this.tab });
        return;
      case 'leader':
        if (!this.hub) this.follow(message.leader);
        return;
      case 'port-frame': {
        if (message.to !== this.tab || !this.hub) return;
        const key = this.key(message.tab, message.port);
        if (message.frame.t === 'hello' && !this.hub.has(key)) this.hub.attach(key, this.remoteHubPort(message.tab, message.port));
        this.hub.receive(key, message.frame);
        return;
      }
      case 'port-closed':
        if (message.to === this.tab) this.hub?.detach(this.key(message.tab, message.port), message.code);
        return;
      case 'frame':
      case 'close': {
        if (message.tab !== this.tab || message.from !== this.leader) return;
        const port = this.ports.get(message.port);
        if (!port || port.leader !== message.from) return;
        if (message.type === 'frame') this.deliver(port, message.frame);
        else this.end(port, message.code, message.reason, message.retryNow);
        return;
      }
      case 'push':
        if (message.from !== this.leader) return;
        for (const port of [...this.ports.values()]) if (port.leader === message.from && port.welcomed) this.deliver(port, message.frame);
        return;
    }
  }

  private post(message: TabMessage): void {
    this.channel.postMessage(message);
  }

  private key(tab: string, port: number): string {
    return `${tab}/${port}`;
  }
}

function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  return c?.randomUUID ? c.randomUUID() : `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}
