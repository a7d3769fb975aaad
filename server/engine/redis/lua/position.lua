-- position.lua: the user's current cursor, creating the stream's epoch if the user has none yet.
--
-- KEYS[1] meta  hash: epoch, rid, version, base, members
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
-- Returns {epoch, version}

-- An epoch is valid only under the Redis run it was last used in (redis-engine.ts, "Epochs and
-- the Redis run"): the user's first script in a new run starts a new epoch.
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'rid', 'version')
local epoch = meta[1]
if not epoch or meta[2] ~= ARGV[2] then
  epoch = ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'rid', ARGV[2])
end
return { epoch, tonumber(meta[3] or '0') }
