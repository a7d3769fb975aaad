/**
 * Key layout. Every per-user key shares the `{u:<uid>}` hash tag and every conversation key the
 * `{c:<conv>}` tag, so each Lua script touches one Redis Cluster slot. Ids match `ID_PATTERN` (no
 * braces, no `|`, `,`, `;` or `#`), so an id can never break out of its tag or of the text
 * formats in ../state-text.ts. Names are short on purpose: a key name is paid for once per user.
 *
 * - `<p>:{u:<uid>}:m` hash: the user's meta and stored totals (epoch `e`, run id `r`, the counters
 *   packed in `h`: version, base, member count, snapshot version, totals, clocks (user-meta.ts),
 *   and `k:<category>` for the categories other than the default), a small listpack;
 * - `<p>:{u:<uid>}:c` hash: conversation -> record (../state-text.ts);
 * - `<p>:{u:<uid>}:s` list: the stream entries after `base`, one per version (index = v - base - 1);
 * - `<p>:{u:<uid>}:p` string: the newest snapshot;
 * - `<p>:{u:<uid>}:L` hash: the read-diffused conversations the user is a member of (only when any);
 * - `<p>:{u:<uid>}:j` hash: the conversation cap's joins claimed and not yet landed, conversation
 *   -> 'deadline|gen' (user_claim.lua), expiring with its newest claim (only when any);
 * - `<p>:{c:<conv>}` hash: the conversation's `#`-fields (maxSeq, mode, category, generation,
 *   pending rewrite, member count) and one field per member (uid -> join tag).
 * - `<p>:{c:<conv>}:r` sorted set: read receipts, each sharing member's read position (uid scored
 *   with its seq, raised with ZADD GT: a max-register); see ../read-positions.ts;
 * - `<p>:{c:<conv>}:t` hash: the conversation's topic registry, topic -> '1' once its child
 *   conversation `<conv>#t:<topic>` is complete, else '0' (topic_add.lua; only when any). A child
 *   id holds a `#` (protocol/child-id.ts), which no other id does: its keys never meet another's;
 * - `<p>:{c:<conv>}:h` hash: the conversation's thread registry, root -> '1' once PostgreSQL holds
 *   it, else '0', for its threads `<conv>#r:<root>` (thread_add.lua, before a child is made; only
 *   when any; dropped and restored with the conversation, dropped by the operator's delete);
 * - `<p>:{u:<uid>}:x` string: the user's `shareReads` (absent: shares), as setting-text.ts writes
 *   it: '0' without the durable tier ('1' is no key), `<rev>:<1|0>` with it.
 * - `<p>:{u:<uid>}:q` string: the user's `mutedMentions` (absent: off), likewise: '1' without the
 *   durable tier, `<rev>:<1|0>` with it (issue 43).
 */
export interface UserKeys {
  meta: string;
  records: string;
  stream: string;
  snapshot: string;
  large: string;
  claims: string;
}

/** The last letter of each of a user's key names, after userKeyTag. */
const USER_KEY_SUFFIX: UserKeys = { meta: 'm', records: 'c', stream: 's', snapshot: 'p', large: 'L', claims: 'j' };

export function userKeys(prefix: string, uid: string): UserKeys {
  const tag = userKeyTag(prefix, uid);
  const s = USER_KEY_SUFFIX;
  return {
    meta: tag + s.meta,
    records: tag + s.records,
    stream: tag + s.stream,
    snapshot: tag + s.snapshot,
    large: tag + s.large,
    claims: tag + s.claims,
  };
}

/** What each of a user's key names starts with: the user's hash tag, then ':'. */
function userKeyTag(prefix: string, uid: string): string {
  return `${userKeyHead(prefix)}${uid}}:`;
}

/** What every key of a user starts with, before its id and the tag's closing brace (the drainer's scripts build the names from it). */
export function userKeyHead(prefix: string): string {
  return `${prefix}:{u:`;
}

export function convKey(prefix: string, conv: string): string {
  return `${convKeyHead(prefix)}${conv}}`;
}

/** The conversation's read receipts (sorted set uid → position), in its slot. */
export function readsKey(prefix: string, conv: string): string {
  return `${convKey(prefix, conv)}:r`;
}

/** The conversation's topic registry (hash topic → '0'|'1'), in its slot: dropped and restored with the conversation. */
export function topicsKey(prefix: string, conv: string): string {
  return `${convKey(prefix, conv)}:t`;
}

/** The conversation's thread registry (hash root → '0'|'1', Engine.addThread), in its slot: dropped and restored with the conversation. */
export function threadsKey(prefix: string, conv: string): string {
  return `${convKey(prefix, conv)}:h`;
}

/** The user's `shareReads` setting, in their slot. */
export function sharingKey(prefix: string, uid: string): string {
  return `${userKeyTag(prefix, uid)}x`;
}

/** The user's `mutedMentions` setting (setting-text.ts; none: off, or lost by Redis with the durable tier), in their slot. */
export function mutedMentionsKey(prefix: string, uid: string): string {
  return `${userKeyTag(prefix, uid)}q`;
}

/** What a conversation's key starts with, before its id and the tag's closing brace (the drainer's head scripts build the names from it). */
export function convKeyHead(prefix: string): string {
  return `${prefix}:{c:`;
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

/**
 * The durable tier's sets (server/durable/) are sharded by slot, so a user step can change them
 * in the same atomic step as the user's keys: on a cluster each slot has its own sets, named
 * with a hash tag that lands in that slot; on one Redis there is one of each.
 *
 * - `<p>:d<shard>` sorted set: 'uid|conv' of every record not yet in PostgreSQL, scored with the
 *   user's write clock at the record's last change (ms or just above: the clear's version);
 * - `<p>:dc<shard>` sorted set: 'h|conv' (head) and 'm|conv' (membership) of conversations not yet
 *   in PostgreSQL;
 * - `<p>:a<shard>` sorted set: uid scored with its last activity (ms), for the cold sweep;
 * - `<p>:ez<shard>` sorted set: the users (and `#conv` conversations) the cold sweep removed,
 *   scored with their eviction's stamp (Redis's clock, µs); restored ones leave it. A restore
 *   compares the stamp it saw before reading PostgreSQL with the one there when it writes: a
 *   different one means an eviction in between, and what it read may be older;
 * - `<p>:ok<shard>` string: present while this Redis has lost nothing since the tier began over
 *   it (or since the last full `redpoint restore`): while PostgreSQL is down, a user or
 *   conversation missing here and not evicted is then new, not lost.
 */
export function shardOf(key: string, cluster: boolean): string {
  return cluster ? slotShard(keySlot(key)) : '';
}

export function slotShard(slot: number): string {
  return `:{${slotTags()[slot]}}`;
}

export function dirtyUsersKey(prefix: string, shard: string): string {
  return `${prefix}:d${shard}`;
}

export function dirtyConvsKey(prefix: string, shard: string): string {
  return `${prefix}:dc${shard}`;
}

export function activityKey(prefix: string, shard: string): string {
  return `${prefix}:a${shard}`;
}

export function evictedKey(prefix: string, shard: string): string {
  return `${prefix}:ez${shard}`;
}

/** The evicted set as a plain set (no stamps), before the sorted set replaced it: converted at start (RedisDurableStore.markIntact). */
export function legacyEvictedKey(prefix: string, shard: string): string {
  return `${prefix}:ev${shard}`;
}

/** A conversation's member of its slot's evicted set: '#' and its id (ids never hold '#', so it names no user). */
export function evictedConvMember(conv: string): string {
  return `#${conv}`;
}

export function intactKey(prefix: string, shard: string): string {
  return `${prefix}:ok${shard}`;
}

/**
 * The badge hook's sets (server/hook/, docs/badge-hook.md), sharded by slot like the durable
 * tier's, so the user step marks a user in the same atomic step as its change:
 *
 * - `<p>:hd<shard>` sorted set: users whose badge may have changed, scored with when the mark is
 *   due (ms): the change's time, or later when the user is cooling down or its delivery failed;
 * - `<p>:hc<shard>` sorted set: users a drainer claimed, scored with the claim's deadline (ms): a
 *   crashed drainer's claim expires and its user is marked again;
 * - `<p>:hk<shard>` sorted set: users delivered lately, scored with the end of their interval (ms);
 * - `<p>:hg<shard>` sorted set: read-diffused conversations whose head moved (members marked at
 *   drain time), scored as `hd`.
 *
 * And per user, beside its keys: `<p>:{u:<uid>}:b` string 'seq|badge' of the last event delivered;
 * `<p>:{u:<uid>}:o` hash (BADGE_HOOK_SOCKETLESS_ONLY): server process id -> until when (ms) that
 * process holds a socket of the user, expiring with its newest entry.
 */
export function hookDirtyKey(prefix: string, shard: string): string {
  return `${prefix}:hd${shard}`;
}

export function hookClaimsKey(prefix: string, shard: string): string {
  return `${prefix}:hc${shard}`;
}

export function hookCoolKey(prefix: string, shard: string): string {
  return `${prefix}:hk${shard}`;
}

export function hookConvsKey(prefix: string, shard: string): string {
  return `${prefix}:hg${shard}`;
}

export function hookDeliveredKey(prefix: string, uid: string): string {
  return `${userKeyTag(prefix, uid)}b`;
}

export function hookPresenceKey(prefix: string, uid: string): string {
  return `${userKeyTag(prefix, uid)}o`;
}

export const SLOTS = 16_384;

let tags: string[] | undefined;

/** For each slot, the shortest base-36 tag found whose CRC16 lands in it (built once, ~160k hashes). */
function slotTags(): string[] {
  if (tags) return tags;
  const found = new Array<string>(SLOTS);
  let left = SLOTS;
  for (let n = 0; left > 0; n++) {
    const tag = n.toString(36);
    const slot = keySlot(tag);
    if (found[slot] === undefined) {
      found[slot] = tag;
      left--;
    }
  }
  tags = found;
  return found;
}

/**
 * The key and channel names the Lua library builds, as Lua functions rendered from the functions
 * above (scripts.ts puts them first in the library): the layout is written once, here. Each is
 * rendered by calling the TypeScript function with markers for its arguments, so a name changed
 * here changes in Lua too (`test/engine/lua-keys.test.ts` runs both on a Redis and compares).
 */
export function luaKeyNames(): string {
  const [X, Y, Z] = ['\u0001', '\u0002', '\u0003'];
  /** `full` (built with prefix Z) with `head(Z)` replaced by the head parameter. */
  const afterHead = (full: string, head: string): string => {
    if (!full.startsWith(head)) throw new Error(`key ${full} does not start with ${head}`);
    return X + full.slice(head.length);
  };
  const functions: Array<[name: string, params: [string, string], render: string]> = [
    ['userKeyTag', ['prefix', 'uid'], userKeyTag(X, Y)],
    ['userChannelOf', ['prefix', 'uid'], userChannel(X, Y)],
    ['convKeyOf', ['prefix', 'conv'], convKey(X, Y)],
    ['convChannelOf', ['prefix', 'conv'], convChannel(X, Y)],
    ['dirtyUsersKeyOf', ['prefix', 'shard'], dirtyUsersKey(X, Y)],
    ['dirtyConvsKeyOf', ['prefix', 'shard'], dirtyConvsKey(X, Y)],
    ['activityKeyOf', ['prefix', 'shard'], activityKey(X, Y)],
    ['hookDirtyKeyOf', ['prefix', 'shard'], hookDirtyKey(X, Y)],
    ['hookConvsKeyOf', ['prefix', 'shard'], hookConvsKey(X, Y)],
    ['hookDeliveredAfterHead', ['head', 'uid'], afterHead(hookDeliveredKey(Z, Y), userKeyHead(Z))],
    ['hookPresenceAfterHead', ['head', 'uid'], afterHead(hookPresenceKey(Z, Y), userKeyHead(Z))],
    // For the scripts handed a key head (keys.ts userKeyHead, convKeyHead) instead of the prefix.
    ['convKeyAfterHead', ['head', 'conv'], afterHead(convKey(Z, Y), convKeyHead(Z))],
    ['userRecordsAfterHead', ['head', 'uid'], afterHead(userKeys(Z, Y).records, userKeyHead(Z))],
  ];
  const quote = (literal: string): string => `'${literal.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
  // The text's literal runs quoted, each marker replaced by its parameter.
  const lua = (text: string, params: [string, string]): string =>
    text
      .split(X)
      .flatMap((run, i) => [
        ...(i > 0 ? [params[0]] : []),
        ...run.split(Y).flatMap((literal, j) => [...(j > 0 ? [params[1]] : []), ...(literal === '' ? [] : [quote(literal)])]),
      ])
      .join(' .. ');
  const lines = functions.map(([name, params, text]) => `local function ${name}(${params.join(', ')}) return ${lua(text, params)} end`);
  const suffixes = Object.entries(USER_KEY_SUFFIX).map(([kind, letter]) => `local USER_${kind.toUpperCase()} = '${letter}'`);
  return `-- keys.ts luaKeyNames(): generated, not edited by hand.\n${[...suffixes, ...lines].join('\n')}\n`;
}
