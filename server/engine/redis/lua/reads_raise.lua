-- reads_raise.lua: read receipts (read-positions.ts). Raises members' read positions in one
-- conversation: a max-register per member (ZADD GT). A user who is not a member (never was, or
-- left: the leave's conversation step ran first) is not recorded, so a raise racing a leave
-- never puts back the position the leave drops after its step.
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] its read positions (sorted set)
-- ARGV    uid, seq, uid, seq, ...
-- Returns per pair 1 when the position rose, else 0; 'absent' when Redis lacks the conversation
-- (nothing applied: with the durable tier the caller restores it and calls again)

if redis.call('EXISTS', KEYS[1]) == 0 then return 'absent' end
local out = {}
for i = 1, #ARGV, 2 do
  local rose = 0
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    rose = redis.call('ZADD', KEYS[2], 'GT', 'CH', ARGV[i + 1], ARGV[i])
  end
  out[#out + 1] = rose
end
return out
