-- admin/conv_delete_finish.lua: every member of the deletion of generation ARGV[1] is removed:
-- drop the deletion record, unless a newer deletion merged more members into it.
--
-- KEYS[1] the deletion record (conv_delete.lua)   ARGV[1] the generation the deletion used
-- Returns 1 when dropped, else 0

local gen = redis.call('HGET', KEYS[1], '#g')
if gen and tonumber(gen) == tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
