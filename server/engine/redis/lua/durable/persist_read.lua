-- durable/persist_read.lua: what the drainer writes to PostgreSQL for one user, read in one step:
-- the user's write clock and the named records.
--
-- KEYS[1] m  KEYS[2] c  (layouts: user_apply.lua)   ARGV conv, ...
-- Returns {w ('0' when none), {record text or false, ...}} (false: the record is gone)

return { redis.call('HGET', KEYS[1], 'w') or '0', redis.call('HMGET', KEYS[2], unpack(ARGV)) }
