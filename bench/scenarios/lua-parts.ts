import { readFileSync } from 'node:fs';
import { luaKeyNames } from '../../server/engine/redis/keys.js';
import { luaUserMeta } from '../../server/engine/redis/user-meta.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { statsConnection } from '../lib/redis-info.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';

const LIBRARY = 'rp_bench_lua_parts';
const REPEATS = 5;

/** What each part is, as the report names it. */
const PARTS = {
  decodeRecord: 'decodeRecord (the record text: match, numbers, table)',
  recordTable: '… of which the record table alone (its constructor)',
  binaryDecode: 'the same record struct-packed: unpack and table',
  encodeRecord: 'encodeRecord (the text, with its numbers formatted)',
  int: '… one int() of a 6-digit number (format %d)',
  binaryEncode: 'the same record struct-packed: pack',
  stateText: 'stateTextOf (the entry, from texts already made)',
  HGET: 'redis.call HGET of one record field',
  HSET: 'redis.call HSET of one record field',
  metaHMGET: "redis.call HMGET of the meta's e, r, h",
  RPUSH: 'redis.call RPUSH of one entry',
  PUBLISH: 'redis.call PUBLISH of a change (no subscriber)',
} as const;
type Part = keyof typeof PARTS;

/** The engine's prelude (as scripts.ts builds it) with the bench's loops after it, as one library. */
function librarySource(): string {
  const lua = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8');
  return [`#!lua name=${LIBRARY}`, luaKeyNames(), luaUserMeta(), lua('../../server/engine/redis/lua/lib/user.lua'), lua('../lua/record-parts.lua')].join('\n');
}

/**
 * The parts of a user op in nanoseconds, each looped inside one redis-server by a Redis function
 * (bench/lua/record-parts.lua) over the engine's own Lua helpers, timed by Redis's clock, the
 * empty loop taken off: where the callgrind profile (message-instructions) counts instructions,
 * this says what a part costs in time, and what a binary record layout would save before it is
 * built. Warm: one key, every line in cache, so it is a floor for the same parts in a real
 * flush over thousands of users' keys.
 */
export const luaPartsSection: Section = {
  id: 'lua-parts',
  title: 'A user op’s parts in Redis, timed one by one',
  inDefaultPlan: true,
  async run(ctx) {
    const report = emptyReport(this.id, this.title);
    const loops = ctx.options.quick ? 100_000 : 400_000;
    const server = await startRedisServer();
    const redis = statsConnection(server.url);
    try {
      await redis.call('FUNCTION', 'LOAD', 'REPLACE', librarySource());
      const timeOf = async (part: Part | 'empty'): Promise<number> => {
        const runs: number[] = [];
        for (let i = 0; i < REPEATS; i++) runs.push(Number(await redis.call('FCALL', 'rp_bench_time_part', 1, 'bench:lua-parts', part, loops)));
        runs.sort((a, b) => a - b);
        return (runs[Math.floor(REPEATS / 2)] ?? Number.NaN) / loops;
      };
      const empty = await timeOf('empty');
      const ns: Record<string, number> = {};
      for (const part of Object.keys(PARTS) as Part[]) {
        ns[part] = Math.max(0, (await timeOf(part)) - empty) * 1000;
        ctx.log(`lua-parts: ${part} ${ns[part].toFixed(0)} ns`);
      }
      const at = (p: Part): number => ns[p] ?? Number.NaN;
      // The state text needs lastSeq's and readSeq's texts whatever the layout (deletedSeq -1 is int()'s fast path).
      const textsOfNumbers = 2 * at('int');
      const binaryNet = at('binaryDecode') - at('decodeRecord') + at('binaryEncode') - (at('encodeRecord') - textsOfNumbers);
      const opParts: Part[] = ['metaHMGET', 'HGET', 'decodeRecord', 'encodeRecord', 'stateText', 'HSET', 'RPUSH', 'PUBLISH'];
      // The meta's write is one more HSET of one field.
      const opSum = opParts.reduce((sum, p) => sum + at(p), 0) + at('HSET');
      report.method.push(
        `Each part of a group member's message op looped ${fmt.int(loops)} times inside one private redis-server by a Redis function over the engine's own Lua (\`bench/lua/record-parts.lua\` after \`lib/user.lua\` and the generated key and meta declarations), timed by Redis's clock; median of ${REPEATS} runs, the empty loop taken off. Warm: one key, in cache, so a floor for the same parts inside a real flush over thousands of users' keys. The binary rows are the layout a struct-packed record would have (flags as bytes, seqs as 6-byte integers, the category after them), measured here before building it.`,
      );
      report.tables.push({
        caption: '**A user op’s parts, ns each (warm)**',
        table: { header: ['part', 'ns'], rows: (Object.keys(PARTS) as Part[]).map((p) => [PARTS[p], fmt.int(at(p))]) },
      });
      report.tables.push({
        caption: '**What they add up to**',
        table: {
          header: ['sum', 'ns'],
          rows: [
            ["a group member's op: the meta's read and write, the record's read, decode, encode and write, the entry, its RPUSH and PUBLISH", fmt.int(opSum)],
            ['a struct-packed record instead of the text, per op (decode, and encode less the number texts the entry needs anyway)', fmt.int(binaryNet)],
          ],
        },
      });
      report.notes.push(
        `A struct-packed record would ${binaryNet <= 0 ? 'save' : 'add'} ${fmt.int(Math.abs(binaryNet))} ns per message op, against the ${fmt.int(opSum)} ns these parts add up to warm and the 17–22 µs of Redis CPU a delivered group member costs in redis-cost (bench/reports/redis-cost-durable.md): the text's pattern match is most of its decode, but most of its encode is the number texts, which the entry needs in either layout. What the warm parts leave out is most of the member's cost: the keys of thousands of users out of cache, the call's arguments and reply, the Lua collector.`,
      );
      report.data = { loops, nanoseconds: ns, opSum, binaryNet };
    } finally {
      redis.disconnect();
      await server.stop();
    }
    return report;
  },
};
