-- durable/persist_clear.lua: after PostgreSQL committed what persist_take read, clear the dirty
-- marks of the records that are still exactly that; a record changed since keeps its mark, so the
-- next drain writes the newer state. Many marks of one shard per call, packed in one string.
--
-- KEYS[1] the dirty set of the marks' shard
-- ARGV[1] the head of a user's key names (as persist_take)
-- ARGV[2] a line per mark, joined by '\n': 'uid|conv <record text as written>' (empty after the
-- space: it was gone)
-- Returns how many marks were cleared.

local head, gone, cleared = ARGV[1], {}, 0
for uid, conv, text in string.gmatch(ARGV[2], '([^|\n]+)|([^ \n]+) ([^\n]*)') do
  if (redis.call('HGET', head .. uid .. '}:c', conv) or '') == text then gone[#gone + 1] = uid .. '|' .. conv end
end
-- One ZREM for many marks: each command a script runs has a cost of its own.
local CHUNK = 1000
for i = 1, #gone, CHUNK do
  cleared = cleared + redis.call('ZREM', KEYS[1], unpack(gone, i, math.min(i + CHUNK - 1, #gone)))
end
return cleared
