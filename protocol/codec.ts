import { Packr } from 'msgpackr';
import { RedpointError } from './errors.js';

/**
 * One shared MessagePack codec. `useRecords: false` keeps frames plain MessagePack maps so any
 * decoder (not only msgpackr) can read them.
 */
// int64AsType: other languages' encoders send seqs as int64; they must arrive as numbers, not BigInt.
export const packr = new Packr({ useRecords: false, mapsAsObjects: true, int64AsType: 'number' });

export function encodeMsgpack(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function decodeMsgpack(bytes: Uint8Array): unknown {
  try {
    return packr.unpack(bytes);
  } catch {
    throw new RedpointError('bad_json', 'body is not valid MessagePack');
  }
}

export function decodeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new RedpointError('bad_json', 'body is not valid JSON');
  }
}
