-- durable/persist_clear.lua: after PostgreSQL committed what persist_read read, clear the dirty
-- marks of the records that are still exactly that; a record changed since keeps its mark, so the
-- next drain writes the newer state. Many users of one shard per call, as persist_read.
--
-- KEYS[1] the dirty set of the users' shard
-- ARGV per user: records key, uid, n, (conv, record text as written ('' = it was gone)) x n
-- Returns how many marks were cleared.

local cleared, i = 0, 1
while i <= #ARGV do
  local records, uid, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  for j = 0, n - 1 do
    local conv, text = ARGV[i + 3 + 2 * j], ARGV[i + 4 + 2 * j]
    if (redis.call('HGET', records, conv) or '') == text then cleared = cleared + redis.call('ZREM', KEYS[1], uid .. '|' .. conv) end
  end
  i = i + 3 + 2 * n
end
return cleared
