-- durable/persist_read.lua: what the drainer writes to PostgreSQL for many users of one shard,
-- each user read in this one step: its write clock and the named records. One call per batch,
-- not one per user (the drainer's cost was its round trips).
--
-- KEYS[1] the dirty set of the users' shard (routes the call: on a cluster the shard is a slot,
-- and every user of its marks lives in it; on one Redis the users' keys are reached by name).
-- ARGV per user: meta key, records key, n, conv x n
-- Returns {w ('0' when none), {record text or false, ...}} per user, in order (false: gone)

local out, i = {}, 1
while i <= #ARGV do
  local meta, records, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local convs = {}
  for j = 1, n do convs[j] = ARGV[i + 2 + j] end
  out[#out + 1] = { redis.call('HGET', meta, 'w') or '0', redis.call('HMGET', records, unpack(convs)) }
  i = i + 3 + n
end
return out
