import { decodeJson, decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import type { ClientFrame, ServerFrame } from '../../protocol/frames.js';

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

export const OPEN = 1;

/** Frames go out in the format of the hello: MessagePack (binary) or JSON (text). */
export function encodeFrame(frame: ClientFrame, binary: boolean): string | Uint8Array {
  return binary ? encodeMsgpack(frame) : JSON.stringify(frame);
}

/** Returns null for anything that is not a frame (the server only sends frames; be lenient anyway). */
export function decodeFrame(data: unknown): ServerFrame | null {
  let value: unknown;
  try {
    if (typeof data === 'string') value = decodeJson(data);
    else if (data instanceof ArrayBuffer) value = decodeMsgpack(new Uint8Array(data));
    else if (ArrayBuffer.isView(data)) value = decodeMsgpack(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    else return null;
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || typeof (value as { t?: unknown }).t !== 'string') return null;
  return value as ServerFrame;
}
