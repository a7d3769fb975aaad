/**
 * Key layout. Every per-user key shares the `{u:<uid>}` hash tag and every per-conversation key
 * the `{c:<conv>}` tag, so each Lua script touches one Redis Cluster slot. Ids match
 * `ID_PATTERN` (no braces), so an id can never break out of its tag.
 */
export interface UserKeys {
  meta: string;
  convs: string;
  totals: string;
  stream: string;
  snaps: string;
  large: string;
}

export interface ConvKeys {
  meta: string;
  members: string;
}

export function userKeys(prefix: string, uid: string): UserKeys {
  const tag = `${prefix}:{u:${uid}}`;
  return {
    meta: `${tag}:meta`,
    convs: `${tag}:c`,
    totals: `${tag}:tot`,
    stream: `${tag}:s`,
    snaps: `${tag}:snaps`,
    large: `${tag}:large`,
  };
}

export function convKeys(prefix: string, conv: string): ConvKeys {
  const tag = `${prefix}:{c:${conv}}`;
  return { meta: `${tag}:meta`, members: `${tag}:mem` };
}

/** CRC16-CCITT (XMODEM), the hash of Redis Cluster slots; table built once. */
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = crc & 0xffff;
  }
  return table;
})();

/**
 * The Redis Cluster slot of `key` (CLUSTER KEYSLOT): CRC16 of its hash tag — the bytes between
 * the first `{` and the next `}`, when non-empty — or of the whole key, modulo 16384. The engine
 * needs it to know which master runs a user's scripts (whose run id they must carry).
 */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] ?? 0);
  return crc & 0x3fff;
}
