/** A frame as it travels: a map with a type tag `t` (PROTOCOL.md, "WebSocket /v1/ws"). */
export interface WireFrame {
  readonly t: string;
  readonly [field: string]: unknown;
}

/**
 * How frames are written to and read from the socket. The server answers in the format of the
 * hello: JSON text frames with `jsonCodec` (the default, readable in devtools), MessagePack
 * binary frames with `msgpack` from `@redpoint/client/msgpack` (smaller; a separate entry so that
 * a JSON-only bundle carries no MessagePack code).
 */
export interface FrameCodec {
  readonly name: string;
  encode(frame: WireFrame): string | Uint8Array;
  /** null for anything that is not a frame (the server only sends frames; be lenient anyway). */
  decode(data: unknown): WireFrame | null;
}

export const jsonCodec: FrameCodec = {
  name: 'json',
  encode: (frame) => JSON.stringify(frame),
  decode: (data) => (typeof data === 'string' ? asFrame(parseJson(data)) : null),
};

/** `value` if it is a map with a string `t`. */
export function asFrame(value: unknown): WireFrame | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  return typeof (value as { t?: unknown }).t === 'string' ? (value as WireFrame) : null;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
