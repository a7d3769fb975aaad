-- durable/persist_clear.lua: after PostgreSQL committed what persist_take read, clear the dirty
-- marks of the records not changed since: a mark's score is the write clock of its record's last
-- change (lib/user.lua markDirty), so a record changed since, even back to the same text, has a
-- larger one and keeps its mark; the next drain writes the newer state. Many marks of one shard
-- per call, packed in one string.
--
-- KEYS[1] the dirty set of the marks' shard
-- ARGV[1] a line per mark, joined by '\n': 'uid|conv <score as taken>'
-- Returns how many marks were cleared.

local gone, cleared = {}, 0
for member, score in string.gmatch(ARGV[1], '([^ \n]+) ([^\n]+)') do
  if tonumber(redis.call('ZSCORE', KEYS[1], member)) == tonumber(score) then gone[#gone + 1] = member end
end
-- One ZREM for many marks: each command a script runs has a cost of its own.
local CHUNK = 1000
for i = 1, #gone, CHUNK do
  cleared = cleared + redis.call('ZREM', KEYS[1], unpack(gone, i, math.min(i + CHUNK - 1, #gone)))
end
return cleared
