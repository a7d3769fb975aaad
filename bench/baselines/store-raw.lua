-- store-raw.lua: the store-cost baseline of bench scenario `store` — the data commands of one
-- user op with nothing decided: no read of the old record, no max-merge, no totals, no snapshot,
-- no trim, no epoch. What is left is the floor of a per-user step in one script.
--
-- KEYS[1] records hash   KEYS[2] meta hash   KEYS[3] stream list
-- ARGV[1] conv   ARGV[2] record text   ARGV[3] stream entry text   ARGV[4] notification channel
-- Returns the user's new version.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local version = redis.call('HINCRBY', KEYS[2], 'v', 1)
redis.call('RPUSH', KEYS[3], ARGV[3])
redis.call('PUBLISH', ARGV[4], version .. '|' .. ARGV[3])
return version
