-- position.lua: the user's current cursor, creating the stream's epoch if the user has none yet.
--
-- KEYS[1] meta  hash: epoch, rid, version, base, members
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
--         (KEYS[1], ARGV[1] and ARGV[2] go to userMeta of lib/epoch.lua, prepended when loading)
-- Returns {epoch, version}

-- lib/epoch.lua (prepended): a new Redis run starts a new epoch.
local epoch, version = userMeta(KEYS[1], ARGV[1], ARGV[2])
return { epoch, version }
