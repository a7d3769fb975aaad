-- conv_mode.lua: switch an existing conversation between write and read diffusion.
--
-- KEYS[1] conv meta  hash: exists, maxSeq, large (1|0), category
-- ARGV[1] large 1|0
-- Returns 1, or 0 for an unknown conversation

if redis.call('HGET', KEYS[1], 'exists') ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 'large', ARGV[1])
return 1
