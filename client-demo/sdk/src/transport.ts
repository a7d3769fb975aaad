import type { FrameCodec, WireFrame } from './codec.js';

/**
 * The part of the WebSocket API the client uses: satisfied by the browser's WebSocket and by the
 * `ws` package. Handlers are declared with the "bivariance hack" so both libraries' event types fit.
 */
type Handler<E> = { bivarianceHack(event: E): void }['bivarianceHack'];

export interface WebSocketLike {
  readonly readyState: number;
  binaryType: string;
  onopen: Handler<unknown> | null;
  onmessage: Handler<{ data: unknown }> | null;
  onclose: Handler<{ code: number; reason: string }> | null;
  onerror: Handler<unknown> | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

const OPEN = 1;

/** What a transport tells the connection about one socket. */
export interface SocketEvents {
  open(): void;
  frame(frame: WireFrame): void;
  /**
   * The socket is gone (not called after the connection's own `close`). `retryNow`: reconnect
   * at once instead of after the backoff (another tab took over the shared socket).
   */
  closed(code: number, reason: string, retryNow?: boolean): void;
}

/** One socket's worth of transport, as the connection drives it. */
export interface FrameSocket {
  send(frame: WireFrame): void;
  /** Closes it; no `closed` event follows. */
  close(code: number, reason: string): void;
}

/** Opens a socket (one connection attempt). May throw (a malformed URL). */
export type Transport = (events: SocketEvents) => FrameSocket;

export interface TransportContext {
  url: string;
  WebSocket: WebSocketConstructor;
  codec: FrameCodec;
  /** A WebSocket of this tab's own, with the codec: what a transport that shares one builds on. */
  direct: Transport;
}

/** Builds the client's transport from its options; `shareTabs()` from `@redpoint/client/tabs` is one. */
export type TransportFactory = (context: TransportContext) => Transport;

/** A WebSocket of this client's own, frames encoded with `codec`. */
export function webSocketTransport(url: string, WebSocket: WebSocketConstructor, codec: FrameCodec): Transport {
  return (events) => {
    const socket = new WebSocket(url);
    socket.binaryType = 'arraybuffer';
    let done = false;
    socket.onopen = () => {
      if (!done) events.open();
    };
    socket.onmessage = (event) => {
      if (done) return;
      const frame = codec.decode(event.data);
      if (frame) events.frame(frame);
    };
    socket.onclose = (event) => {
      if (done) return;
      done = true;
      events.closed(event.code, event.reason);
    };
    // Errors are always followed by a close event, which carries what the client acts on.
    socket.onerror = () => undefined;
    return {
      send(frame) {
        if (!done && socket.readyState === OPEN) socket.send(codec.encode(frame));
      },
      close(code, reason) {
        if (done) return;
        done = true;
        socket.close(code, reason);
      },
    };
  };
}
