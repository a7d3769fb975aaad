import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  activityKey,
  convChannel,
  convKey,
  convKeyHead,
  dirtyConvsKey,
  dirtyUsersKey,
  luaKeyNames,
  slotShard,
  userChannel,
  userKeyHead,
  userKeys,
} from '../../server/engine/redis/keys.js';
import { countersOf, encodeUserCounters, luaUserMeta, USER_META_COUNTERS, USER_META_PACKED, type UserCounters } from '../../server/engine/redis/user-meta.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';

/**
 * The Lua library builds key and channel names with functions rendered from keys.ts
 * (luaKeyNames): run on a real Redis, each must name exactly what the TypeScript function does,
 * for prefixes and ids with the characters a Lua string literal must escape.
 */
describe('key names in Lua, rendered from keys.ts', () => {
  const server = fileFixture('redis-server', () => startRedisServer());
  let redis: Redis;
  beforeAll(() => {
    redis = new Redis(server().url);
  });
  afterAll(() => {
    redis.disconnect();
  });

  it('every function names what its TypeScript twin names', async () => {
    const script = `${luaKeyNames()}
local p, id, shard = ARGV[1], ARGV[2], ARGV[3]
local tag = userKeyTag(p, id)
return {
  tag .. USER_META, tag .. USER_RECORDS, tag .. USER_STREAM, tag .. USER_SNAPSHOT, tag .. USER_LARGE, tag .. USER_CLAIMS,
  userChannelOf(p, id), convKeyOf(p, id), convChannelOf(p, id),
  dirtyUsersKeyOf(p, shard), dirtyConvsKeyOf(p, shard), activityKeyOf(p, shard),
  convKeyAfterHead(ARGV[4], id), userRecordsAfterHead(ARGV[5], id),
}`;
    for (const [prefix, id, shard] of [
      ['rp', 'alice', ''],
      ["we'ird\\pre", 'u-1_x.y', slotShard(4242)],
    ] as const) {
      const k = userKeys(prefix, id);
      const lua = await redis.eval(script, 0, prefix, id, shard, convKeyHead(prefix), userKeyHead(prefix));
      expect(lua).toEqual([
        k.meta,
        k.records,
        k.stream,
        k.snapshot,
        k.large,
        k.claims,
        userChannel(prefix, id),
        convKey(prefix, id),
        convChannel(prefix, id),
        dirtyUsersKey(prefix, shard),
        dirtyConvsKey(prefix, shard),
        activityKey(prefix, shard),
        convKey(prefix, id),
        k.records,
      ]);
    }
  });

  it("the meta's packed counters: what Lua's struct packs, TypeScript reads by name, and the other way round (user-meta.ts)", async () => {
    // Distinct values near each field's bounds, so a swapped field or a wrong width shows.
    const values: UserCounters = {
      version: 2 ** 48 - 2,
      base: 2 ** 40 + 3,
      members: 123_456,
      snapshotVersion: 2 ** 47 + 5,
      expiredAt: 4_102_444_800,
      total: 2 ** 52 + 1,
      mentions: 654_321,
      defaultTotal: 2 ** 50 + 7,
      w: 1_893_456_000_123,
      lastActive: 1_893_456_000_456,
    };
    const ordered = USER_META_COUNTERS.map((c) => values[c.name]);
    const script = `${luaUserMeta()}
local packed = struct.pack(META_PACK, ${ordered.map((_, i) => `tonumber(ARGV[${i + 1}])`).join(', ')})
local back = { struct.unpack(META_PACK, ARGV[${ordered.length + 1}]) }
local texts = {}
for i = 1, #META_LEGACY do texts[i] = string.format('%d', back[i]) end
return { packed, META_PACKED, texts }`;
    const reply = (await redis.callBuffer('EVAL', script, '0', ...ordered.map(String), encodeUserCounters({ ...values, members: values.members + 1 }))) as [
      Buffer,
      Buffer,
      Buffer[],
    ];
    expect(countersOf([reply[0]])).toEqual(values);
    expect(reply[1].toString()).toBe(USER_META_PACKED);
    expect(reply[2].map(String)).toEqual(USER_META_COUNTERS.map((c) => String(c.name === 'members' ? values.members + 1 : values[c.name])));
  });

  it('no Lua file builds a key or channel name by hand (hash tags, channel and set names come from keys.ts)', () => {
    const root = fileURLToPath(new URL('../../server/engine/redis/lua/', import.meta.url));
    const files = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.lua') ? [join(dir, e.name)] : [],
      );
    const handMade = /'[^']*(\{u:|\{c:|:bus:|\}:c|\}')|'\}'|':(d|dc|a|ez|ok)' \.\./;
    const found: string[] = [];
    for (const file of files('')) {
      readFileSync(join(root, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const code = line.replace(/--.*$/, '');
          if (handMade.test(code)) found.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
  });
});
