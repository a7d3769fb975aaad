-- conv_ensure.lua: create the conversation if needed; a given category replaces the stored one.
--
-- KEYS[1] conv meta  hash: exists, maxSeq, large (1|0), category
-- KEYS[2] conv mem   set of member uids
-- ARGV[1] 1 when a category is given, else 0   ARGV[2] category (or the default for a new one)
-- Returns {maxSeq, large 1|0, category, memberCount}

if redis.call('HGET', KEYS[1], 'exists') ~= '1' then
  redis.call('HSET', KEYS[1], 'exists', '1', 'maxSeq', '0', 'large', '0', 'category', ARGV[2])
elseif ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'category', ARGV[2])
end
local meta = redis.call('HMGET', KEYS[1], 'maxSeq', 'large', 'category')
return { tonumber(meta[1]), tonumber(meta[2]), meta[3], redis.call('SCARD', KEYS[2]) }
