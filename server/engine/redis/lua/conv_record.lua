-- conv_record.lua: raise the conversation's maxSeq (max-merge) and, for a write-diffused one,
-- read its members in the same atomic step, so a message never misses a member who joined
-- before it was recorded.
--
-- KEYS[1] conv meta  hash: exists, maxSeq, large (1|0), category
-- KEYS[2] conv mem   set of member uids
-- ARGV[1] seq
-- Returns nil for an unknown conversation (nothing is created), else
-- {maxSeq, large 1|0, category, memberCount, {member, ...} (empty when large)}

if redis.call('HGET', KEYS[1], 'exists') ~= '1' then return nil end
local meta = redis.call('HMGET', KEYS[1], 'maxSeq', 'large', 'category')
local maxSeq = tonumber(meta[1])
local seq = tonumber(ARGV[1])
if seq > maxSeq then
  maxSeq = seq
  -- Lua numbers are doubles and tostring() keeps only 14 digits: format integers explicitly.
  redis.call('HSET', KEYS[1], 'maxSeq', string.format('%d', seq))
end
local members = {}
if meta[2] ~= '1' then members = redis.call('SMEMBERS', KEYS[2]) end
return { maxSeq, tonumber(meta[2]), meta[3], redis.call('SCARD', KEYS[2]), members }
