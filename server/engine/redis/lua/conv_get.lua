-- conv_get.lua: the conversation's info, read in one atomic step.
--
-- KEYS[1] conv meta  hash: exists, maxSeq, large (1|0), category
-- KEYS[2] conv mem   set of member uids
-- Returns nil for an unknown conversation, else {maxSeq, large 1|0, category, memberCount}

if redis.call('HGET', KEYS[1], 'exists') ~= '1' then return nil end
local meta = redis.call('HMGET', KEYS[1], 'maxSeq', 'large', 'category')
return { tonumber(meta[1]), tonumber(meta[2]), meta[3], redis.call('SCARD', KEYS[2]) }
