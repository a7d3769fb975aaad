-- hook/take_convs.lua: the badge hook's read-diffused conversations of one shard whose head
-- moved (keys.ts hookConvsKey, marked by conv_record.lua), taken in this one step
-- (engine/badge-marks.ts takeConversations). A due mark of a conversation expanded less than an
-- interval ago is put off to the interval's end: a large group is expanded at most once per
-- interval. Cooling conversations share the users' cooling set as '#<conv>' (ids never hold '#').
--
-- KEYS[1] the shard's conversation marks   KEYS[2] its cooling set (hookCoolKey)
-- ARGV[1] now (ms)   ARGV[2] the interval's end for those taken (ms)   ARGV[3] the most to take
-- Returns the conversations taken.

local marks, cool = KEYS[1], KEYS[2]
local now, coolUntil, max = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local out = {}
local due = redis.call('ZRANGE', marks, '-inf', now, 'BYSCORE', 'LIMIT', 0, max)
for k = 1, #due do
  local conv = due[k]
  local later = redis.call('ZSCORE', cool, '#' .. conv)
  if later and tonumber(later) > now then
    redis.call('ZADD', marks, later, conv)
  else
    redis.call('ZREM', marks, conv)
    redis.call('ZADD', cool, coolUntil, '#' .. conv)
    out[#out + 1] = conv
  end
end
return out
