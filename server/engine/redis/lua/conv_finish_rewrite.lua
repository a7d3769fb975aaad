-- conv_finish_rewrite.lua: the member rewrite of generation ARGV[1] is done; clear the marker
-- unless a newer change set its own.
--
-- KEYS[1] the conversation hash (conv_members.lua)   ARGV[1] the generation the rewrite used
-- Returns 1 when cleared, else 0

local pending = redis.call('HGET', KEYS[1], '#r')
if pending and tonumber(pending) <= tonumber(ARGV[1]) then
  redis.call('HDEL', KEYS[1], '#r')
  return 1
end
return 0
