-- hook/mark_users.lua: marks users of one shard whose badge may have changed outside a user step
-- (the members of a read-diffused conversation whose head moved; engine/badge-marks.ts
-- markUsers). NX: a mark already there keeps its due time.
--
-- KEYS[1] the shard's marks (keys.ts hookDirtyKey)
-- ARGV[1] now (ms)   ARGV[2..] the uids
-- Returns how many were marked.

local now = ARGV[1]
local added = 0
for k = 2, #ARGV, 1000 do
  local args = { 'NX' }
  for j = k, math.min(k + 999, #ARGV) do
    args[#args + 1] = now
    args[#args + 1] = ARGV[j]
  end
  added = added + redis.call('ZADD', KEYS[1], unpack(args))
end
return added
