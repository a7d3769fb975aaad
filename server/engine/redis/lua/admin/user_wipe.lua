-- admin/user_wipe.lua: delete every key of one user, if its records are exactly the ones given
-- (compared in this same step, so nothing that landed since the caller read them is lost).
--
-- KEYS[1] m  KEYS[2] c  KEYS[3] s  KEYS[4] p  KEYS[5] L  (layouts: user_apply.lua)
-- KEYS[6] j  the conversation cap's claims (user_claim.lua)
-- KEYS[7] b, KEYS[8] o  the badge hook's last delivered badge and socket presence (keys.ts hookDeliveredKey, hookPresenceKey)
-- ARGV[1] notification channel ('' = none)   ARGV[2] PUBLISH or SPUBLISH
-- ARGV[3..] the expected records: conv, record text, ...
-- Publishes a change under the epoch of a user never seen ('0'), so connected clients pull and
-- find nothing. Returns 1 when deleted, 0 when the records differ.

local all = redis.call('HGETALL', KEYS[2])
if #all ~= #ARGV - 2 then return 0 end
local want = {}
for i = 3, #ARGV, 2 do want[ARGV[i]] = ARGV[i + 1] end
for i = 1, #all, 2 do
  if want[all[i]] ~= all[i + 1] then return 0 end
end
local seen = redis.call('EXISTS', KEYS[1]) == 1
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
if seen and #all > 0 and ARGV[1] ~= '' then redis.call(ARGV[2], ARGV[1], '0|\n0|' .. all[1]) end
return 1
