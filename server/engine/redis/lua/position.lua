-- position.lua: the user's current cursor, creating the stream's epoch if the user has none yet.
--
-- KEYS[1] meta  hash: epoch, version, base, members
-- ARGV[1] candidate epoch (used only when the user has none: Lua cannot make random ids)
-- Returns {epoch, version}

local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  epoch = ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch)
end
return { epoch, tonumber(redis.call('HGET', KEYS[1], 'version') or '0') }
