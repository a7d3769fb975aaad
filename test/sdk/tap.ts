import WebSocket from 'ws';
import { msgpack } from '../../client-demo/sdk/src/msgpack.js';
import type { WebSocketConstructor, WebSocketLike } from '../../client-demo/sdk/src/transport.js';
import { packr } from '../../protocol/codec.js';
import type { ClientFrame, ServerFrame } from '../../protocol/frames.js';

/**
 * A `ws` WebSocket with a tap, injected into the client: tests see every frame both ways and
 * decide what the client receives (drop, duplicate, hold back, reorder), deterministically.
 */
export interface Tap {
  /** Called for each server frame; call `deliver` (any number of times, now or later) to pass it on. */
  incoming?(frame: ServerFrame, deliver: (frame?: ServerFrame) => void): void;
  sent: Array<{ frame: ClientFrame; at: number }>;
  received: Array<{ frame: ServerFrame; at: number }>;
  sockets: TappedSocket[];
}

export function newTap(incoming?: Tap['incoming']): Tap {
  return { ...(incoming ? { incoming } : {}), sent: [], received: [], sockets: [] };
}

export interface TappedSocket extends WebSocketLike {
  /** Drops the TCP connection without a close frame (a network failure). */
  terminate(): void;
}

export function tapped(tap: Tap): WebSocketConstructor {
  return class implements TappedSocket {
    private readonly inner: WebSocket;
    onopen: WebSocketLike['onopen'] = null;
    onmessage: WebSocketLike['onmessage'] = null;
    onclose: WebSocketLike['onclose'] = null;
    onerror: WebSocketLike['onerror'] = null;

    constructor(url: string) {
      this.inner = new WebSocket(url);
      this.inner.binaryType = 'arraybuffer';
      tap.sockets.push(this);
      this.inner.onopen = (e) => this.onopen?.(e);
      this.inner.onerror = (e) => this.onerror?.(e);
      this.inner.onclose = (e) => this.onclose?.({ code: e.code, reason: e.reason });
      this.inner.onmessage = (e) => {
        const frame = msgpack.decode(e.data) as ServerFrame | null;
        if (!frame) return;
        tap.received.push({ frame, at: performance.now() });
        const deliver = (f: ServerFrame = frame): void => {
          if (this.inner.readyState === WebSocket.OPEN) this.onmessage?.({ data: JSON.stringify(f) });
        };
        if (tap.incoming) tap.incoming(frame, deliver);
        else deliver();
      };
    }

    get readyState(): number {
      return this.inner.readyState;
    }

    get binaryType(): string {
      return this.inner.binaryType;
    }

    set binaryType(_value: string) {
      // Always ArrayBuffer: the tap decodes frames itself.
    }

    send(data: string | Uint8Array): void {
      const frame = (typeof data === 'string' ? JSON.parse(data) : packr.unpack(data)) as ClientFrame;
      tap.sent.push({ frame, at: performance.now() });
      this.inner.send(data);
    }

    close(code?: number, reason?: string): void {
      this.inner.close(code, reason);
    }

    terminate(): void {
      this.inner.terminate();
    }
  };
}
