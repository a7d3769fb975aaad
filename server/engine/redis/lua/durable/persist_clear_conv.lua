-- durable/persist_clear_conv.lua: after PostgreSQL committed a conversation's head ('h|<conv>')
-- or membership ('m|<conv>'), clear its dirty mark if the field it was read with is unchanged.
--
-- KEYS[1] the dirty set of the conversation's slot   KEYS[2] the conversation hash
-- ARGV[1] the mark   ARGV[2] the field ('#s' for a head, '#g' for a membership)   ARGV[3] its value as read ('' = none)
-- Returns 1 when cleared.

if (redis.call('HGET', KEYS[2], ARGV[2]) or '') ~= ARGV[3] then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])
