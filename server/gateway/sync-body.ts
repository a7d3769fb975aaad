import { encodeMsgpack } from '../../protocol/codec.js';
import { LIMITS } from '../../protocol/limits.js';
import type { PullReply } from '../../protocol/types.js';

/**
 * The body of a `GET /v1/sync` reply as pieces of about `perPiece` snapshot states each, JSON or
 * MessagePack, which concatenated are exactly one document: the HTTP layer writes them one event
 * loop turn apart, so a 20,000-conversation snapshot is neither one multi-megabyte string nor one
 * long pause for every other request. A reply without a large snapshot is one piece.
 */
export function syncBodyPieces(reply: PullReply, msgpack: boolean, perPiece: number = LIMITS.snapshotPartConvs): Iterable<string | Uint8Array> {
  const snapshot = reply.snapshot;
  if (!snapshot || snapshot.convs.length <= perPiece) return [msgpack ? encodeMsgpack(reply) : JSON.stringify(reply)];
  return msgpack ? msgpackPieces(reply, perPiece) : jsonPieces(reply, perPiece);
}

function* jsonPieces(reply: PullReply, perPiece: number): Generator<string> {
  const { snapshot, ...rest } = reply;
  const convs = snapshot?.convs ?? [];
  // The snapshot first, then the other fields: key order means nothing in JSON.
  let prefix = `{"snapshot":{"v":${JSON.stringify(snapshot?.v ?? 0)},"convs":[`;
  for (let i = 0; i < convs.length; i += perPiece) {
    yield prefix +
      convs
        .slice(i, i + perPiece)
        .map((state) => JSON.stringify(state))
        .join(',');
    prefix = ',';
  }
  yield `]},${JSON.stringify(rest).slice(1)}`;
}

function* msgpackPieces(reply: PullReply, perPiece: number): Generator<Uint8Array> {
  const { snapshot, ...rest } = reply;
  const convs = snapshot?.convs ?? [];
  const tail = encodeMsgpack(rest);
  const restHeader = headerLength(tail);
  // A map of rest's fields plus `snapshot`, its first value a map {v, convs: array of every state}.
  yield concat([
    mapHeader(Object.keys(rest).length + 1),
    encodeMsgpack('snapshot'),
    mapHeader(2),
    encodeMsgpack('v'),
    encodeMsgpack(snapshot?.v ?? 0),
    encodeMsgpack('convs'),
    arrayHeader(convs.length),
  ]);
  // Each piece: one encoded array of states, without its own array header.
  for (let i = 0; i < convs.length; i += perPiece) {
    const piece = encodeMsgpack(convs.slice(i, i + perPiece));
    yield piece.slice(headerLength(piece));
  }
  yield tail.slice(restHeader);
}

/** Copies each part at once: an encoder may reuse its buffer for the next value. */
function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

function mapHeader(n: number): Uint8Array {
  return n < 16 ? Uint8Array.of(0x80 | n) : sized(0xde, 0xdf, n);
}

function arrayHeader(n: number): Uint8Array {
  return n < 16 ? Uint8Array.of(0x90 | n) : sized(0xdc, 0xdd, n);
}

function sized(tag16: number, tag32: number, n: number): Uint8Array {
  if (n < 0x10000) return Uint8Array.of(tag16, n >> 8, n & 0xff);
  return Uint8Array.of(tag32, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
}

/** Bytes of the map or array header that starts an encoded map or array. */
function headerLength(encoded: Uint8Array): number {
  const tag = encoded[0] ?? 0;
  if ((tag & 0xf0) === 0x80 || (tag & 0xf0) === 0x90) return 1;
  if (tag === 0xde || tag === 0xdc) return 3;
  if (tag === 0xdf || tag === 0xdd) return 5;
  throw new Error(`not a MessagePack map or array (tag 0x${tag.toString(16)})`);
}
