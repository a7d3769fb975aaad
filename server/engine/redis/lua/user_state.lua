-- user_state.lua: every record and the stored totals of one user, read in one atomic step.
--
-- KEYS[1] meta  hash: epoch, rid, version, base, members
-- KEYS[2] c     hash: conv -> cmsgpack record
-- KEYS[3] tot   hash: total, mentions, cat:<category>
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
-- Returns {epoch, version, {packed record, ...}, {field, value, ...} of the totals}

-- An epoch is valid only under the Redis run it was last used in (redis-engine.ts, "Epochs and
-- the Redis run"): the user's first script in a new run starts a new epoch.
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'rid', 'version')
local epoch = meta[1]
if not epoch or meta[2] ~= ARGV[2] then
  epoch = ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'rid', ARGV[2])
end
local version = tonumber(meta[3] or '0')
return { epoch, version, redis.call('HVALS', KEYS[2]), redis.call('HGETALL', KEYS[3]) }
