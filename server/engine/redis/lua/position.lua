-- position.lua: the user's current cursor. A user the store has never seen gets the candidate
-- epoch and version 0, and nothing is created. lib/user.lua comes first in the library.
--
-- KEYS[1] m  meta hash (user_apply.lua)
-- ARGV[1] the Redis run id (INFO server)
-- Returns {epoch, version}

local _, epoch, version = userMeta(KEYS[1], ARGV[1])
return { epoch, version }
