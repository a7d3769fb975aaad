/**
 * Key layout. Every per-user key shares the `{u:<uid>}` hash tag and every conversation key the
 * `{c:<conv>}` tag, so each Lua script touches one Redis Cluster slot. Ids match `ID_PATTERN` (no
 * braces, no `|`, `,`, `;` or `#`), so an id can never break out of its tag or of the text
 * formats in ../state-text.ts. Names are short on purpose: a key name is paid for once per user.
 *
 * - `<p>:{u:<uid>}:m` hash: the user's meta and stored totals (epoch, run id, version, base, member
 *   count, snapshot version, total, mentions, `k:<category>`), a small listpack;
 * - `<p>:{u:<uid>}:c` hash: conversation -> record (../state-text.ts);
 * - `<p>:{u:<uid>}:s` list: the stream entries after `base`, one per version (index = v - base - 1);
 * - `<p>:{u:<uid>}:p` string: the newest snapshot;
 * - `<p>:{u:<uid>}:L` hash: the read-diffused conversations the user is a member of (only when any);
 * - `<p>:{c:<conv>}` hash: the conversation's `#`-fields (maxSeq, mode, category, generation,
 *   pending rewrite, member count) and one field per member (uid -> join tag).
 */
export interface UserKeys {
  meta: string;
  records: string;
  stream: string;
  snapshot: string;
  large: string;
}

export function userKeys(prefix: string, uid: string): UserKeys {
  const tag = `${prefix}:{u:${uid}}`;
  return { meta: `${tag}:m`, records: `${tag}:c`, stream: `${tag}:s`, snapshot: `${tag}:p`, large: `${tag}:L` };
}

export function convKey(prefix: string, conv: string): string {
  return `${prefix}:{c:${conv}}`;
}

/** Pub/sub channels carry the same hash tags as the keys: on a cluster, a user's channel lives on its shard. */
export function userChannel(prefix: string, uid: string): string {
  return `${prefix}:bus:{u:${uid}}`;
}

export function convChannel(prefix: string, conv: string): string {
  return `${prefix}:bus:{c:${conv}}`;
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
