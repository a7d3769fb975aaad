import { Packr } from 'msgpackr';
import { asFrame, type FrameCodec, jsonCodec } from './codec.js';

/**
 * MessagePack frames (binary WebSocket messages): `new RedpointClient({ codec: msgpack, ... })`.
 *
 * Maps are decoded as `Map`s and then turned into plain objects with `Object.fromEntries`:
 * msgpackr, when it builds objects itself, renames a `__proto__` key to `__proto_` (a guard
 * against prototype pollution), and conversation ids such as `__proto__` are keys of a sync
 * reply's `heads`. `Object.fromEntries` defines own properties, so every key arrives as sent.
 * `int64AsType: 'number'`: other languages' encoders may send seqs as int64.
 */
const packr = new Packr({ useRecords: false, mapsAsObjects: false, int64AsType: 'number' });

export const msgpack: FrameCodec = {
  name: 'msgpack',
  encode: (frame) => packr.pack(frame),
  decode(data) {
    if (typeof data === 'string') return jsonCodec.decode(data);
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else return null;
    try {
      return asFrame(plain(packr.unpack(bytes)));
    } catch {
      return null;
    }
  },
};

function plain(value: unknown): unknown {
  if (value instanceof Map) return Object.fromEntries(Array.from(value, ([k, v]) => [String(k), plain(v)]));
  if (Array.isArray(value)) return value.map(plain);
  return value;
}
