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
  tag .. USER_META, tag .. USER_RECORDS, tag .. USER_STREAM, tag .. USER_SNAPSHOT, tag .. USER_LARGE,
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
