-- bench/lua/record-parts.lua: loops over one part of a user op, for bench/scenarios/lua-parts.ts.
-- Appended to the engine's own prelude (keys.ts luaKeyNames, user-meta.ts luaUserMeta,
-- lib/user.lua), so decodeRecord, encodeRecord, stateTextOf and int are the engine's, not copies.
-- The binary layout is the one a struct-packed record would have (not built: the section says
-- why), written here only to measure it beside the text one.

-- A record as a group member's message op finds it: a member, lastSeq moving, read a little
-- behind, never deleted, the default category, no mentions.
local RECORD = '1000|123456|123400|-1|3|2||'
local BINARY = '<BBBBi6i6i6I6I6s'
local ENTRY = 'c1|000|123457|123400|0|-1|'
local PAYLOAD = 'Xk3v9|1764810000000\n42|' .. ENTRY

local parts = {}

parts.empty = function(n)
  for _ = 1, n do end
end
parts.decodeRecord = function(n)
  for _ = 1, n do decodeRecord('c1', RECORD) end
end
parts.encodeRecord = function(n)
  local r = decodeRecord('c1', RECORD)
  for i = 1, n do
    r.lastSeq = 123456 + i
    encodeRecord(r)
  end
end
parts.stateText = function(n)
  local r = decodeRecord('c1', RECORD)
  for _ = 1, n do stateTextOf(r, '123457', '123400', '-1') end
end
parts.int = function(n)
  for i = 1, n do int(123456 + i) end
end
parts.recordTable = function(n)
  for _ = 1, n do
    local _t = {
      conv = 'c1', member = true, muted = false, marked = false, large = false, lastSeq = 123456, readSeq = 123400,
      deletedSeq = -1, gen = '3', joinGen = '2', category = 'default', mentions = NO_MENTIONS, text = RECORD, dirty = false,
    }
  end
end
parts.binaryDecode = function(n)
  local raw = spack(BINARY, 1, 0, 0, 0, 123456, 123400, -1, 3, 2, '')
  for _ = 1, n do
    local m, mu, mk, lg, ls, rs, ds, g, jg, cat = sunpack(BINARY, raw)
    local _t = {
      conv = 'c1', member = m == 1, muted = mu == 1, marked = mk == 1, large = lg == 1, lastSeq = ls, readSeq = rs,
      deletedSeq = ds, gen = g, joinGen = jg, category = cat == '' and 'default' or cat, mentions = NO_MENTIONS, text = raw, dirty = false,
    }
  end
end
parts.binaryEncode = function(n)
  for i = 1, n do spack(BINARY, 1, 0, 0, 0, 123456 + i, 123400, -1, 3, 2, '') end
end
parts.HGET = function(n, key)
  for _ = 1, n do call('HGET', key, 'c1') end
end
parts.HSET = function(n, key)
  for _ = 1, n do call('HSET', key, 'c1', RECORD) end
end
parts.metaHMGET = function(n, key)
  for _ = 1, n do call('HMGET', key, 'e', 'r', META_PACKED) end
end
parts.RPUSH = function(n, key)
  for i = 1, n do
    call('RPUSH', key, ENTRY)
    if i % 64 == 0 then call('DEL', key) end
  end
end
parts.PUBLISH = function(n, key)
  for _ = 1, n do call('PUBLISH', key, PAYLOAD) end
end

-- KEYS[1] a scratch key of this bench (the caller's), ARGV[1] the part, ARGV[2] the loop count.
-- Returns the loop's time in µs, by Redis's clock.
local function timePart(keys, args)
  if not call then bindGlobals() end
  local part = parts[args[1]]
  if not part then error('unknown part ' .. tostring(args[1])) end
  local key = keys[1]
  if args[1] == 'metaHMGET' then
    call('DEL', key)
    call('HSET', key, 'e', 'Xk3v9', 'r', string.rep('f', 40), META_PACKED, string.rep('\0', 58))
  elseif args[1] == 'HGET' or args[1] == 'HSET' then
    call('DEL', key)
    call('HSET', key, 'c1', RECORD, 'c2', RECORD)
  end
  local t0 = call('TIME')
  part(tonumber(args[2]), key)
  local t1 = call('TIME')
  call('DEL', key)
  return (t1[1] - t0[1]) * 1000000 + (t1[2] - t0[2])
end

redis.register_function('rp_bench_time_part', timePart)
