-- admin/conv_delete.lua: the conversation step of deleting a conversation. The conversation hash
-- goes (so conv_record.lua finds no conversation: messages are refused, and conv_members.lua
-- creates a new one), and its members move to the deletion record under a generation newer
-- than every one the conversation gave. Repeated before the deletion is finished, it returns
-- the same deletion; after a re-creation it merges the new members in under a newer generation.
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] the deletion record (same hash tag):
--         '#g' generation, '#s' head when deleted, and uid -> join tag per member to remove
-- ARGV[1] 1: take the generation now even if the clock has not passed it yet
-- A re-created conversation's generations come from the clock (conv_members.lua), so the
-- deletion's must be below every later clock reading: when the conversation's generations are
-- at or above the clock, the script returns how many ms to wait instead.
-- Returns nil (nothing to delete), {0, ms to wait}, or {1, gen, head, {uid, ...}}

local function int(n) return string.format('%d', n) end
local conv, deletion = KEYS[1], KEYS[2]

local function members()
  local out = {}
  for _, field in ipairs(redis.call('HKEYS', deletion)) do
    if string.sub(field, 1, 1) ~= '#' then out[#out + 1] = field end
  end
  return out
end

local d = redis.call('HMGET', deletion, '#g', '#s')
if redis.call('EXISTS', conv) == 0 then
  if not d[1] then return nil end
  return { 1, tonumber(d[1]), tonumber(d[2]), members() }
end
local meta = redis.call('HMGET', conv, '#g', '#s')
local gen = math.max(tonumber(meta[1] or '0'), tonumber(d[1] or '0')) + 1
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if gen >= ms and ARGV[1] ~= '1' then return { 0, gen - ms + 1 } end
gen = math.max(gen, ms - 1)

local all = redis.call('HGETALL', conv)
local fields = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 1) ~= '#' then
    fields[#fields + 1] = all[i]
    fields[#fields + 1] = all[i + 1]
  end
end
hsetChunks(deletion, fields)
local head = math.max(tonumber(meta[2] or '0'), tonumber(d[2] or '0'))
redis.call('HSET', deletion, '#g', int(gen), '#s', int(head))
redis.call('DEL', conv, conv .. ':m')
return { 1, gen, head, members() }
