-- admin/conv_repair.lua: repair a conversation's own fields: recount the member count '#n', and
-- raise the generation '#g' to at least ARGV[1] (records can be ahead of a conversation that
-- lost writes; the roster's membership ops must then carry a newer generation to apply).
--
-- KEYS[1] the conversation hash (conv_members.lua)   ARGV[1] the least generation
-- Returns 1 when the conversation exists, else 0

local function int(n) return string.format('%d', n) end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local count = 0
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, 1) ~= '#' then count = count + 1 end
end
local gen = tonumber(redis.call('HGET', KEYS[1], '#g') or '0')
redis.call('HSET', KEYS[1], '#n', int(count), '#g', int(math.max(gen, tonumber(ARGV[1]))))
return 1
