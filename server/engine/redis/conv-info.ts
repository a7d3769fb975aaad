import type { ConvInfo } from '../engine.js';

/** `#s #l #c #g #n` of a conversation hash, in that order. */
export function convInfo(conv: string, parts: ReadonlyArray<unknown>): ConvInfo {
  // Texts (HMGET, HGETALL) or a script's reply as it is (numbers stay numbers): no copy either way.
  return {
    conv,
    maxSeq: Number(parts[0] ?? 0),
    large: String(parts[1]) === '1',
    category: parts[2] === null || parts[2] === undefined ? 'default' : String(parts[2]),
    memberCount: Number(parts[4] ?? 0),
    gen: Number(parts[3] ?? 0),
  };
}
