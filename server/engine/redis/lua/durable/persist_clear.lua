-- durable/persist_clear.lua: after PostgreSQL committed what persist_read read, clear the dirty
-- marks of the records that are still exactly that; a record changed since keeps its mark, so the
-- next drain writes the newer state.
--
-- KEYS[1] the dirty set of the user's slot   KEYS[2] c  records hash
-- ARGV[1] uid   ARGV[2..] conv, record text as written ('' = it was gone), ...
-- Returns how many marks were cleared.

local cleared = 0
for i = 2, #ARGV, 2 do
  local now = redis.call('HGET', KEYS[2], ARGV[i]) or ''
  if now == ARGV[i + 1] then cleared = cleared + redis.call('ZREM', KEYS[1], ARGV[1] .. '|' .. ARGV[i]) end
end
return cleared
