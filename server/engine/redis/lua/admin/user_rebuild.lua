-- admin/user_rebuild.lua: rebuild what one user's records determine, atomically: the stored
-- totals (t, x, k:<category>), the member count (n) and the large hash (L); with ARGV[3] = 1 the
-- stream also starts over under a new epoch (rules.ts contribution; lib/user.lua is prepended).
--
-- KEYS[1] m  KEYS[2] c  KEYS[3] s  KEYS[4] p  KEYS[5] L  (layouts: user_apply.lua)
-- ARGV[1] candidate epoch   ARGV[2] the Redis run id   ARGV[3] restream 1|0
-- ARGV[4] idle seconds (0: never)   ARGV[5] notification channel ('' = none)   ARGV[6] PUBLISH or SPUBLISH
-- A restream raises the version by one and puts base, snapshot version and a snapshot built from
-- the records at it, with no entries; a user without meta but with member records gets one.
-- It publishes one change under the new epoch, so connected clients pull that snapshot.
-- Returns 1 when something was written, 0 for a user with nothing to rebuild.

local keys = { meta = KEYS[1], records = KEYS[2], stream = KEYS[3], snapshot = KEYS[4], large = KEYS[5] }
local all = redis.call('HGETALL', keys.records)
local total, mentions, members = 0, 0, 0
local categories, large = {}, {}
local firstState
for i = 1, #all, 2 do
  local r = decodeRecord(all[i], all[i + 1])
  if r.member then
    members = members + 1
    if not firstState then firstState = stateText(r) end
    if r.large then
      large[#large + 1] = r.conv
      large[#large + 1] = '1'
    elseif not r.muted and r.lastSeq > r.deletedSeq then
      local unread = math.max(0, r.lastSeq - r.readSeq)
      total = total + unread
      mentions = mentions + #r.mentions
      if unread ~= 0 then categories[r.category] = (categories[r.category] or 0) + unread end
    end
  end
end

local meta = redis.call('HMGET', keys.meta, 'e', 'v')
local exists = meta[1] ~= false
if not exists and members == 0 then return 0 end

local fields = { 'n', int(members), 't', int(total), 'x', int(mentions) }
local gone = {}
for _, field in ipairs(redis.call('HKEYS', keys.meta)) do
  if string.sub(field, 1, 2) == 'k:' and not categories[string.sub(field, 3)] then gone[#gone + 1] = field end
end
for category, n in pairs(categories) do
  fields[#fields + 1] = 'k:' .. category
  fields[#fields + 1] = int(n)
end

redis.call('DEL', keys.large)
local CHUNK = 1000
for i = 1, #large, CHUNK do
  redis.call('HSET', keys.large, unpack(large, i, math.min(i + CHUNK - 1, #large)))
end

local restream = ARGV[3] == '1' or not exists
local version
if restream then
  version = tonumber(meta[2] or '0') + 1
  for _, v in ipairs({ 'e', ARGV[1], 'r', ARGV[2], 'v', int(version), 'b', int(version), 'sv', int(version) }) do
    fields[#fields + 1] = v
  end
  restartStream(keys, {}, tonumber(ARGV[4]))
end
redis.call('HSET', keys.meta, unpack(fields))
if #gone > 0 then redis.call('HDEL', keys.meta, unpack(gone)) end
if restream and firstState and ARGV[5] ~= '' then
  redis.call(ARGV[6], ARGV[5], ARGV[1] .. '|\n' .. int(version) .. '|' .. firstState)
end
return 1
