-- user_claim.lua: the conversation cap's claim of one user joining one conversation
-- (Engine.claimJoins, server/sync/conversation-cap.ts), atomically on the user: rules.ts
-- claimOutcome over the user's member count and the live claims of its other joins (rules.ts
-- claimLive: spent once a membership op of its conversation lands on the user's record, lapsed
-- at its deadline). lib/user.lua comes first in the library.
--
-- KEYS[1] m  meta hash (user_apply.lua)   KEYS[2] c  records hash
-- KEYS[3] j  claims hash: conversation -> 'deadline|gen': the deadline in ms of Redis's clock,
--         the generation of the user's record of that conversation when claimed ('0': none)
-- ARGV[1] the conversation   ARGV[2] the cap   ARGV[3] how long a claim holds (ms)
-- ARGV[4] durable tier: 1: a user without meta is reported 'absent' and nothing is written (the
--         caller restores it from PostgreSQL first, then asks again), else 0
-- ARGV[5] ClaimTerms.within: '' counts every conversation of the user; else only those whose id
--         starts with it, member records and live claims both (a thread follow's cap, threads.ts)
-- Returns {outcome, held}: outcome 'member', 'claimed' or 'full' (rules.ts CLAIM_OUTCOMES), held
-- the member count plus the live claims of other conversations; or 'absent'.

-- rules.ts claimOutcome, line for line.
local function claimOutcome(member, claimed, held, cap)
  if member then return 'member' end
  if claimed or held < cap then return 'claimed' end
  return 'full'
end

local conv, cap, holdMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local meta = call('HMGET', KEYS[1], 'e', META_PACKED)
if ARGV[4] == '1' and not meta[1] then return 'absent' end
local within = ARGV[5]
local members
if within == '' then
  members = select(3, counters(KEYS[1], meta[2]))
else
  -- The member records under the prefix: HSCAN matches the fields in Redis (glob characters of the
  -- prefix escaped); only the matches are decoded. O(the user's records): a new follow only.
  members = 0
  local pattern = string.gsub(within, '[%*%?%[%]\\]', '\\%0') .. '*'
  local cursor = '0'
  repeat
    local page = call('HSCAN', KEYS[2], cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = page[1]
    local kv = page[2]
    for i = 1, #kv, 2 do
      if decodeRecord(kv[i], kv[i + 1]).member then members = members + 1 end
    end
  until cursor == '0'
end
local now = redisNowMs()
local others, mine, gone = judgeClaims(KEYS[3], KEYS[2], conv, now, within)
if #gone > 0 then call('HDEL', KEYS[3], unpack(gone)) end
local held = members + others
local raw = call('HGET', KEYS[2], conv)
local r = raw and decodeRecord(conv, raw) or nil
local outcome = claimOutcome(r ~= nil and r.member, mine, held, cap)
if outcome == 'claimed' then
  call('HSET', KEYS[3], conv, int(now + holdMs) .. '|' .. (r and r.gen or '0'))
  -- The hash goes with its newest claim.
  call('PEXPIRE', KEYS[3], holdMs)
end
return { outcome, held }
