/**
 * The user meta hash's counters (keys.ts `<p>:{u:<uid>}:m`): version, base, member count,
 * snapshot version, stream expiry, totals and the durable tier's clocks, packed in one binary
 * field `h` with Lua's `struct` format below, beside the epoch `e`, the run id `r` and the
 * non-default categories' totals `k:<category>` as texts.
 *
 * Why packed: a user step reads and writes the counters at every op, and each field a Redis
 * command carries costs a script ~2k instructions (its argument, lookup and reply), where one
 * `struct.unpack` of all of them costs less than one `tonumber` of a text
 * (bench/reports/redis-cost.md, "the meta packed"). The field stays under Redis's
 * `hash-max-listpack-value` (64 bytes), so the hash keeps its compact encoding.
 *
 * This list is the one declaration of the layout: the Lua library's `META_PACK` and
 * `META_LEGACY` are generated from it (luaUserMeta), and decodeUserCounters reads it. A meta
 * written before the packing holds the counters as text fields named `legacy`; every script
 * reads those when `h` is absent and converts the meta at its next write.
 */
export const USER_META_COUNTERS = [
  // Bounds: every unsigned 6-byte field holds up to 2^48 (protocol limits.ts maxSeq; ms clocks
  // until the year 10889); the totals are doubles, exact to 2^53 as the texts they replace.
  { name: 'version', legacy: 'v', code: 'I6' },
  { name: 'base', legacy: 'b', code: 'I6' },
  { name: 'members', legacy: 'n', code: 'i4' },
  { name: 'snapshotVersion', legacy: 'sv', code: 'I6' },
  { name: 'expiredAt', legacy: 'ex', code: 'I4' },
  { name: 'total', legacy: 't', code: 'd' },
  { name: 'mentions', legacy: 'x', code: 'i4' },
  { name: 'defaultTotal', legacy: 'k:default', code: 'd' },
  { name: 'w', legacy: 'w', code: 'I6' },
  { name: 'lastActive', legacy: 'a', code: 'I6' },
] as const;

/** The meta field that holds the packed counters. */
export const USER_META_PACKED = 'h';

export type UserCounterName = (typeof USER_META_COUNTERS)[number]['name'];
export type UserCounters = Record<UserCounterName, number>;

interface Codec {
  size: number;
  read(buf: Buffer, at: number): number;
  write(buf: Buffer, at: number, value: number): void;
}

/** Lua struct's codes as Buffer reads and writes (little-endian, as `<` asks). */
const CODECS: Record<(typeof USER_META_COUNTERS)[number]['code'], Codec> = {
  I6: { size: 6, read: (b, at) => b.readUIntLE(at, 6), write: (b, at, v) => b.writeUIntLE(v, at, 6) },
  I4: { size: 4, read: (b, at) => b.readUInt32LE(at), write: (b, at, v) => b.writeUInt32LE(v, at) },
  i4: { size: 4, read: (b, at) => b.readInt32LE(at), write: (b, at, v) => b.writeInt32LE(v, at) },
  d: { size: 8, read: (b, at) => b.readDoubleLE(at), write: (b, at, v) => b.writeDoubleLE(v, at) },
};

/** Bytes of the packed field. */
const USER_META_PACKED_BYTES = USER_META_COUNTERS.reduce((sum, c) => sum + CODECS[c.code].size, 0);

/** The Lua library's declarations of the layout (scripts.ts puts them first, with the key names). */
export function luaUserMeta(): string {
  const pack = `<${USER_META_COUNTERS.map((c) => c.code).join('')}`;
  const legacy = USER_META_COUNTERS.map((c) => `'${c.legacy}'`).join(', ');
  return [
    '-- user-meta.ts luaUserMeta(): generated, not edited by hand.',
    `local META_PACKED, META_PACK = '${USER_META_PACKED}', '${pack}'`,
    `local META_LEGACY = { ${legacy} }`,
    '',
  ].join('\n');
}

/** The counters of a packed field (struct's little-endian layout above). */
function decodeUserCounters(packed: Buffer): UserCounters {
  if (packed.length !== USER_META_PACKED_BYTES) throw new Error(`packed user meta of ${packed.length} bytes, expected ${USER_META_PACKED_BYTES}`);
  const out = {} as UserCounters;
  let at = 0;
  for (const c of USER_META_COUNTERS) {
    out[c.name] = CODECS[c.code].read(packed, at);
    at += CODECS[c.code].size;
  }
  return out;
}

/** The packed field of `counters` (tests and fixtures that set a counter; the server's writes are the Lua's). */
export function encodeUserCounters(counters: UserCounters): Buffer {
  const out = Buffer.alloc(USER_META_PACKED_BYTES);
  let at = 0;
  for (const c of USER_META_COUNTERS) {
    CODECS[c.code].write(out, at, counters[c.name]);
    at += CODECS[c.code].size;
  }
  return out;
}

/** The counters of a meta from its packed field and its legacy fields, as one HMGET returns them (userMetaFields order); null when it has none. */
export function countersOf(fields: readonly (Buffer | null)[]): UserCounters | null {
  const [packed, ...legacy] = fields;
  if (packed) return decodeUserCounters(packed);
  if (legacy.every((f) => f == null)) return null;
  const out = {} as UserCounters;
  USER_META_COUNTERS.forEach((c, i) => {
    out[c.name] = Number(legacy[i]?.toString() ?? 0);
  });
  return out;
}

/** The fields to HMGET (as Buffers) for countersOf. */
export const USER_META_COUNTER_FIELDS: readonly string[] = [USER_META_PACKED, ...USER_META_COUNTERS.map((c) => c.legacy)];
