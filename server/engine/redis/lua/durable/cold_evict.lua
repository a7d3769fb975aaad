-- durable/cold_evict.lua: remove a cold user from Redis entirely, once PostgreSQL has all of it:
-- not active since the cutoff, and no record still marked dirty. Atomic with every user step
-- (which would have moved the activity or marked a record), so a message racing the eviction
-- either lands first and keeps the user, or finds the user gone and restores it.
--
-- KEYS[1] m  KEYS[2] c  KEYS[3] s  KEYS[4] p  KEYS[5] L  (layouts: user_apply.lua)
-- KEYS[6] the activity set of the user's slot   KEYS[7] its dirty set   KEYS[8] its evicted set
-- (keys.ts evictedKey: the user enters it with this eviction's stamp)
-- KEYS[9] j  the conversation cap's claims (user_claim.lua): a live claim is a join in flight,
--         so the user is not cold; spent or lapsed claims go with the user
-- KEYS[10] x  the read receipts' shareReads setting (keys.ts sharingKey): PostgreSQL has it (written
--          through), so it goes with the user and is read back on the user's next use
-- KEYS[11] q  the mutedMentions setting (keys.ts mutedMentionsKey): likewise written through to
--          PostgreSQL first, so it goes too and is read back on the user's next use
-- ARGV[1] uid   ARGV[2] cutoff (ms): active after it means not cold
-- Returns the user's conversations when evicted (the sweep looks at them next: their members may
-- all be cold now), 0 when active again, -1 when something is not yet in PostgreSQL.

local uid, cutoff = ARGV[1], tonumber(ARGV[2])
local score = redis.call('ZSCORE', KEYS[6], uid)
-- The last activity (ms) the meta holds; 0: none.
local active = select(10, counters(KEYS[1], redis.call('HGET', KEYS[1], META_PACKED)))
if active == 0 then active = nil end
if (score and tonumber(score) > cutoff) or (active and active > cutoff) then
  if not score and active then redis.call('ZADD', KEYS[6], active, uid) end
  return 0
end
local convs = redis.call('HKEYS', KEYS[2])
for i = 1, #convs, 1000 do
  local marks = {}
  for j = i, math.min(i + 999, #convs) do marks[#marks + 1] = uid .. '|' .. convs[j] end
  for _, s in ipairs(redis.call('ZMSCORE', KEYS[7], unpack(marks))) do
    if s then return -1 end
  end
end
if judgeClaims(KEYS[9], KEYS[2], nil, redisNowMs()) > 0 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[9], KEYS[10], KEYS[11])
redis.call('ZREM', KEYS[6], uid)
redis.call('ZADD', KEYS[8], evictionStamp(), uid)
return convs
