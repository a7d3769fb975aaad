-- user_state.lua: every record and the stored totals of one user, read in one atomic step.
--
-- KEYS[1] meta  hash: epoch, version, base, members
-- KEYS[2] c     hash: conv -> cmsgpack record
-- KEYS[3] tot   hash: total, mentions, cat:<category>
-- ARGV[1] candidate epoch (used only when the user has none: Lua cannot make random ids)
-- Returns {epoch, version, {packed record, ...}, {field, value, ...} of the totals}

local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  epoch = ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch)
end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
return { epoch, version, redis.call('HVALS', KEYS[2]), redis.call('HGETALL', KEYS[3]) }
