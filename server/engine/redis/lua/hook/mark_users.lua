-- hook/mark_users.lua: marks users of one shard whose badge may have changed outside a user step
-- (the members of a read-diffused conversation whose head moved; engine/badge-marks.ts
-- markUsers), or whose last socket closed (setPresence).
--
-- KEYS[1] the shard's marks (keys.ts hookDirtyKey)
-- ARGV[1] now (ms)   ARGV[2] 'NX': a mark already there keeps its due time; 'LT': it is brought
--         forward to now (a mark put off while the user had a socket; claim.lua puts it off
--         again if the user is claimed or cooling down)   ARGV[3..] the uids
-- Returns how many were marked.

local now, flag = ARGV[1], ARGV[2]
local added = 0
for k = 3, #ARGV, 1000 do
  local args = { flag }
  for j = k, math.min(k + 999, #ARGV) do
    args[#args + 1] = now
    args[#args + 1] = ARGV[j]
  end
  added = added + redis.call('ZADD', KEYS[1], unpack(args))
end
return added
