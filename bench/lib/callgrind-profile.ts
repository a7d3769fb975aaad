import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Where a callgrind dump's instructions go, by kind of work: each function's own (exclusive)
 * instructions, put in one category by its name or its source file. Only a redis-server built
 * with symbols names the Lua interpreter's functions (bench/tools/redis-with-symbols.sh); on a
 * stripped one they are all unnamed addresses and `hasSymbols` says so.
 *
 * Categories are exclusive: a function is counted once, where its own instructions run, so
 * malloc called by a Redis command and malloc called by the Lua interpreter are both "memory".
 */
export const PROFILE_CATEGORIES = [
  'Lua: bytecode (luaV_execute)',
  'Lua: function calls',
  'Lua: tables',
  'Lua: strings (make, concat, match, format)',
  'Lua: numbers ↔ text',
  'Lua: struct pack/unpack',
  'Lua: collector',
  'Lua: other',
  'redis.call bridge (arguments, replies, registry)',
  'Redis commands and dispatch',
  'memory (malloc, free)',
  'other',
] as const;
export type ProfileCategory = (typeof PROFILE_CATEGORIES)[number];

export interface Profile {
  total: number;
  byCategory: Record<ProfileCategory, number>;
  /** Whether the Lua interpreter's functions were named (a symbol build). */
  hasSymbols: boolean;
}

// Names from Lua 5.1's sources (lvm.c, ldo.c, ltable.c, lstring.c, lstrlib.c, lgc.c, ...) and
// Redis's deps/lua struct.c; the first matching rule wins.
const LUA_RULES: Array<[RegExp, ProfileCategory]> = [
  [/^luaV_execute$/, 'Lua: bytecode (luaV_execute)'],
  [/^(luaD_|luaF_close$|callrethooks$|adjust_varargs$|tryfuncTM$|f_call$|lua_call$|lua_pcall$)/, 'Lua: function calls'],
  [
    /^(luaC_|sweeplist$|sweepstrgc$|propagatemark$|singlestep$|reallymarkobject$|traverse|markroot$|atomic$|remarkupvals$|marktmu$|cleartable$|freeobj$|luaH_free$|luaF_free|luaE_free|checkSizes$)/,
    'Lua: collector',
  ],
  [
    /^(luaB_tonumber$|lua_tonumber$|luaV_tonumber$|luaO_str2d$|luaO_rawequalObj$|lua_pushnumber$|luaL_checknumber$|luaL_optnumber$|luaL_checkinteger$|luaL_optinteger$|lua_tointeger$|luaO_fb2int$)/,
    'Lua: numbers ↔ text',
  ],
  [/^(b_pack$|b_unpack$|b_size$|getnum$|optsize$|gettoalign$|controloptions$|putinteger$|getinteger$|correctbytes$)/, 'Lua: struct pack/unpack'],
  [
    /^(luaH_|newkey$|resize$|rehash$|setnodevector$|setarrayvector$|mainposition$|luaV_gettable$|luaV_settable$|numusearray$|numusehash$|computesizes$|countint$|arrayindex$|findindex$|unbound_search$|getfreepos$|lua_settable$|lua_gettable$|lua_rawseti$|lua_rawgeti$|lua_rawget$|lua_rawset$|lua_createtable$|lua_next$|luaB_next$|luaB_ipairs$|luaB_pairs$|ipairsaux$|luaB_unpack$|tinsert$|tconcat$|aux_getn$)/,
    'Lua: tables',
  ],
  [
    /^(luaS_|luaV_concat$|luaV_tostring$|luaO_pushfstring$|luaO_pushvfstring$|str_|gmatch|match$|max_expand$|min_expand$|classend$|match_class$|singlematch$|matchbracketclass$|start_capture$|end_capture$|match_capture$|push_captures$|push_onecapture$|get_onecapture$|addvalue$|add_s$|add_value$|addquoted$|addintlen$|scanformat$|luaL_add|luaL_buff|luaL_prepbuffer$|luaL_pushresult$|emptybuffer$|adjuststack$|lua_pushlstring$|lua_pushstring$|lua_tolstring$|luaL_checklstring$|luaL_optlstring$|lua_concat$|lua_objlen$)/,
    'Lua: strings (make, concat, match, format)',
  ],
];

const REDIS_BRIDGE_FILES = /\/src\/(script_lua|script|function_lua|functions|resp_parser)\.c$/;
// Inlined into a header's lines (sds.h), so named rather than found by file.
const REDIS_BRIDGE_NAMES =
  /^(luaArgsToRedisArgv|freeLuaRedisArgv|luaRedis.*|redisProtocolToLuaType.*|parseReply.*|luaReplyToRedisReply|luaGetFromRegistry|scriptCall)$/;
const MEMORY_NAMES =
  /^(malloc|free|realloc|calloc|_int_malloc|_int_free|_int_realloc|malloc_consolidate|unlink_chunk.*|tcache_.*|l_alloc|luaM_realloc_|luaM_growaux_|luaM_toobig|je_.*|zmalloc.*|zfree.*|zrealloc.*|ztrymalloc.*|ztryrealloc.*|zlibc_free)$/;
const NUMBER_TEXT_NAMES =
  /^(____strtod_l_internal|str_to_mpn.*|round_and_return|__vfprintf_internal|__printf_fp.*|_IO_.*|__vsnprintf_internal|.*sprintf.*|__mpn_.*|hack_digit)$/;

function categoryOf(file: string, fn: string, object: string): ProfileCategory {
  if (MEMORY_NAMES.test(fn) || file.includes('/malloc/') || file.includes('jemalloc')) return 'memory (malloc, free)';
  if (NUMBER_TEXT_NAMES.test(fn)) return 'Lua: numbers ↔ text';
  if (REDIS_BRIDGE_FILES.test(file) || REDIS_BRIDGE_NAMES.test(fn)) return 'redis.call bridge (arguments, replies, registry)';
  if (file === '???' && object.endsWith('redis-server')) {
    for (const [pattern, category] of LUA_RULES) if (pattern.test(fn)) return category;
    // Lua's API and auxiliary library (lapi.c, lauxlib.c): the rest of the interpreter.
    return 'Lua: other';
  }
  if (/\/src\/[^/]+\.[ch]$/.test(file)) return 'Redis commands and dispatch';
  return 'other';
}

/** A dump's profile by category (`callgrind_annotate --inclusive=no`: each function's own instructions). */
export async function readProfile(dumpPath: string): Promise<Profile> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=no', '--threshold=100', '--auto=no', dumpPath], { maxBuffer: 64 * 1024 * 1024 });
  const byCategory = Object.fromEntries(PROFILE_CATEGORIES.map((c) => [c, 0])) as Record<ProfileCategory, number>;
  let total = 0;
  let hasSymbols = false;
  // "  36,841,000 (20.4%)  ???:luaV_execute'2 [/path/redis-server]" (a recursion level after ')
  // The object in brackets is left out when it is the previous line's.
  const line = /^\s*([\d,]+) \([^)]*\)\s+(.*?):([^:\s[]+?)(?:'\d+)?(?: \[([^\]]*)\])?\s*$/;
  let object = '';
  for (const text of stdout.split('\n')) {
    if (/PROGRAM TOTALS/.test(text)) {
      total = Number(/^\s*([\d,]+)/.exec(text)?.[1]?.replaceAll(',', '') ?? 0);
      continue;
    }
    const m = line.exec(text);
    if (!m) continue;
    const [, count, file, fn, named] = m as unknown as [string, string, string, string, string | undefined];
    if (named !== undefined) object = named;
    if (fn === 'luaV_execute') hasSymbols = true;
    byCategory[categoryOf(file, fn, object)] += Number(count.replaceAll(',', ''));
  }
  return { total, byCategory, hasSymbols };
}
