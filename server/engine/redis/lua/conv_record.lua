-- conv_record.lua: raise the conversation's maxSeq (max-merge) and read, in the same atomic step,
-- who is a member: every member of a write-diffused conversation, or which of the candidates
-- (senders, mentioned users) are members of a read-diffused one. A raised head of a read-diffused
-- conversation is published on its channel.
--
-- KEYS[1] the conversation hash (conv_members.lua)
-- ARGV[1] seq   ARGV[2] arrival time ('' = none)   ARGV[3] channel ('' = none)   ARGV[4] PUBLISH or SPUBLISH
-- ARGV[5..] candidates (read diffusion only)
-- Returns nil for an unknown conversation (nothing is created), else
-- {maxSeq, large 1|0, category, gen, member count, {uid, ...}}; for a write-diffused one the
-- list is HKEYS: the members plus the '#' fields, which the caller drops.

local function int(n) return string.format('%d', n) end
local K = KEYS[1]
local meta = redis.call('HMGET', K, '#s', '#l', '#c', '#g', '#n')
if not meta[1] then return nil end
local maxSeq = tonumber(meta[1])
local seq = tonumber(ARGV[1])
local raised = seq > maxSeq
if raised then
  maxSeq = seq
  redis.call('HSET', K, '#s', int(seq))
end
local large = meta[2] == '1'
local members
if not large then
  members = redis.call('HKEYS', K)
else
  members = {}
  local CHUNK = 1000
  local i = 5
  while i <= #ARGV do
    local j = math.min(i + CHUNK - 1, #ARGV)
    local tags = redis.call('HMGET', K, unpack(ARGV, i, j))
    for k = i, j do
      if tags[k - i + 1] then members[#members + 1] = ARGV[k] end
    end
    i = j + 1
  end
  if raised and ARGV[3] ~= '' then redis.call(ARGV[4], ARGV[3], int(maxSeq) .. '|' .. ARGV[2]) end
end
return { maxSeq, large and 1 or 0, meta[3], tonumber(meta[4]), tonumber(meta[5]), members }
