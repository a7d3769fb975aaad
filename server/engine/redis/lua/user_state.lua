-- user_state.lua: every record and the stored totals of one user, read in one atomic step.
--
-- KEYS[1] meta  hash: epoch, rid, version, base, members
-- KEYS[2] c     hash: conv -> cmsgpack record
-- KEYS[3] tot   hash: total, mentions, cat:<category>
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
--         (KEYS[1], ARGV[1] and ARGV[2] go to userMeta of lib/epoch.lua, prepended when loading)
-- Returns {epoch, version, {packed record, ...}, {field, value, ...} of the totals}

-- lib/epoch.lua (prepended): a new Redis run starts a new epoch.
local epoch, version = userMeta(KEYS[1], ARGV[1], ARGV[2])
return { epoch, version, redis.call('HVALS', KEYS[2]), redis.call('HGETALL', KEYS[3]) }
