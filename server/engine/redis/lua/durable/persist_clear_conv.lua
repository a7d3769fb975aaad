-- durable/persist_clear_conv.lua: after PostgreSQL committed a conversation's head ('h|<conv>')
-- or membership ('m|<conv>'), clear its dirty mark if the fields it was read with are unchanged.
--
-- KEYS[1] the dirty set of the conversation's slot   KEYS[2] the conversation hash
-- ARGV[1] the mark   ARGV[2] the fields' values as read, joined by '|' ('' for a field not there)
-- ARGV[3..] the fields (redis-durable.ts CLEAR_FIELDS: '#s' for a head; '#g' and '#P' for a membership)
-- Returns 1 when cleared.

local values = redis.call('HMGET', KEYS[2], unpack(ARGV, 3))
for i = 1, #values do values[i] = values[i] or '' end
if table.concat(values, '|') ~= ARGV[2] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
