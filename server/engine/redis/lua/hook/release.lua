-- hook/release.lua: ends one claim of the badge hook (engine/badge-marks.ts release), only while
-- the claim is still the caller's (its deadline unchanged: a claim that expired and was taken
-- over belongs to the other drainer).
--
-- KEYS[1] the shard's marks   KEYS[2] its claims   KEYS[3] its cooling users (claim.lua)
-- ARGV[1] the head of a user's key names   ARGV[2] uid   ARGV[3] the claim's deadline (ms)
-- ARGV[4] 'd' (delivered) or 'r' (retry)   ARGV[5] the interval's end (d) or the retry's time (r)
-- ARGV[6] (d) the delivered 'seq|badge'   ARGV[7] (d) how long it is kept (ms)
-- Returns 1 when released, 0 when the claim was no longer the caller's.

local marks, claims, cool = KEYS[1], KEYS[2], KEYS[3]
local head, uid = ARGV[1], ARGV[2]
local held = redis.call('ZSCORE', claims, uid)
if not held or tonumber(held) ~= tonumber(ARGV[3]) then return 0 end
redis.call('ZREM', claims, uid)
if ARGV[4] == 'r' then
  -- The retry's time holds even when a newer change marked the user meanwhile (the fold then
  -- delivers that newer value, after the backoff).
  redis.call('ZADD', marks, ARGV[5], uid)
  return 1
end
redis.call('SET', hookDeliveredAfterHead(head, uid), ARGV[6], 'PX', ARGV[7])
redis.call('ZADD', cool, ARGV[5], uid)
-- A change during the delivery marked the user (claim.lua put that mark off to the claim's
-- deadline): its event is due at the interval's end.
redis.call('ZADD', marks, 'XX', ARGV[5], uid)
return 1
