-- hook/claim.lua: the badge hook's next users of one shard, claimed in this one step
-- (engine/badge-marks.ts claimUsers; the sets are keys.ts hookDirtyKey, hookClaimsKey,
-- hookCoolKey). A claim whose deadline passed (its drainer died) marks its user again first. A
-- due mark of a user that is claimed, or cooling down after a delivery, is put off to the claim's
-- deadline or the interval's end: one drainer per user, at most one event per interval.
--
-- KEYS[1] the shard's marks (routes the call: on a cluster the shard is a slot, and every user of
--         its sets lives in it)   KEYS[2] its claims   KEYS[3] its cooling users
-- ARGV[1] the head of a user's key names (keys.ts userKeyHead)   ARGV[2] now (ms)
-- ARGV[3] the lease (ms)   ARGV[4] the most users to claim
-- ARGV[5] '1': socket-less users only (BADGE_HOOK_SOCKETLESS_ONLY): a user some server process
--         holds a live socket of (keys.ts hookPresenceKey) is not claimed; its mark is put off
--         to when the newest of those entries lapses (a process that closes the user's last
--         socket marks it at once; one that died stops refreshing its entry)
-- Returns the claims' deadline, then per claimed user: uid, when its mark was due, the last
-- delivered 'seq|badge' ('' when none).

local marks, claims, cool = KEYS[1], KEYS[2], KEYS[3]
local head, now, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local socketless = ARGV[5] == '1'

-- Until when some process holds a socket of `uid` (ms), when that is after now; else nil.
local function liveUntil(uid)
  local untils = redis.call('HVALS', hookPresenceAfterHead(head, uid))
  local latest
  for k = 1, #untils do
    local t = tonumber(untils[k])
    if t > now and (not latest or t > latest) then latest = t end
  end
  return latest
end
local lease = now + tonumber(ARGV[3])

local expired = redis.call('ZRANGE', claims, '-inf', now, 'BYSCORE')
for k = 1, #expired do redis.call('ZADD', marks, 'NX', now, expired[k]) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', claims, '-inf', now) end
redis.call('ZREMRANGEBYSCORE', cool, '-inf', now)

local out = { lease }
local claimed = 0
-- Each round either claims a mark or puts it off past now, so the next round reads new ones;
-- the rounds are bounded so one call never holds Redis for long.
for _ = 1, 4 do
  if claimed >= max then break end
  local due = redis.call('ZRANGE', marks, '-inf', now, 'BYSCORE', 'LIMIT', 0, max - claimed, 'WITHSCORES')
  if #due == 0 then break end
  for k = 1, #due, 2 do
    local uid, at = due[k], due[k + 1]
    local later = redis.call('ZSCORE', claims, uid) or redis.call('ZSCORE', cool, uid) or (socketless and liveUntil(uid))
    if later then
      redis.call('ZADD', marks, later, uid)
    else
      redis.call('ZREM', marks, uid)
      redis.call('ZADD', claims, lease, uid)
      out[#out + 1] = uid
      out[#out + 1] = at
      out[#out + 1] = redis.call('GET', hookDeliveredAfterHead(head, uid)) or ''
      claimed = claimed + 1
    end
  end
end
return out
