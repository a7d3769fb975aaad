-- reads_peers.lua: read receipts (read-positions.ts `peers`). For each named conversation with
-- exactly 2 members, the position of the member who is not ARGV[1]: the one-to-one peer's. One
-- call for many conversations of one server (their keys by name), so a GET /unread or a snapshot
-- pays one round trip and no command parsing per conversation.
--
-- KEYS[1] the first conversation's hash (routing only)
-- ARGV[1] the asking uid, then per conversation: its hash key, its positions key, its id
-- Returns {conv, seq, ...} of the peers found, then '#' and the conversations Redis lacks

local uid = ARGV[1]
local out, missing = {}, {}
for i = 2, #ARGV, 3 do
  local n = redis.call('HGET', ARGV[i], '#n')
  if not n then
    missing[#missing + 1] = ARGV[i + 2]
  elseif n == '2' then
    local listed = redis.call('ZRANGE', ARGV[i + 1], 0, 2, 'WITHSCORES')
    -- The score as Redis wrote it (text): the reply stays all strings.
    local best, bestText
    for j = 1, #listed, 2 do
      local seq = tonumber(listed[j + 1])
      if listed[j] ~= uid and (not best or seq > best) then best, bestText = seq, listed[j + 1] end
    end
    if best then
      out[#out + 1] = ARGV[i + 2]
      out[#out + 1] = bestText
    end
  end
end
out[#out + 1] = '#'
for _, conv in ipairs(missing) do out[#out + 1] = conv end
return out
