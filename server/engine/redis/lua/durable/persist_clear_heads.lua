-- durable/persist_clear_heads.lua: after PostgreSQL committed the heads persist_read_heads read,
-- clear the 'h|<conv>' marks of the conversations whose head is still that; a head raised since
-- keeps its mark for the next drain.
--
-- KEYS[1] the dirty set of the conversations' shard
-- ARGV[1] the head of a conversation's key name (as persist_read_heads)
-- ARGV[2] a line per conversation, joined by '\n': '<conv> <head as read>' (empty after the
-- space: it was gone)
-- Returns how many marks were cleared.

local head, gone = ARGV[1], {}
for conv, seq in string.gmatch(ARGV[2], '([^ \n]+) ([^\n]*)') do
  if (redis.call('HGET', convKeyAfterHead(head, conv), '#s') or '') == seq then gone[#gone + 1] = 'h|' .. conv end
end
-- One ZREM per chunk of marks, not one per conversation: each command a script runs costs ~8k
-- instructions around it, more than the removal itself.
local cleared = 0
for i = 1, #gone, 1000 do
  cleared = cleared + redis.call('ZREM', KEYS[1], unpack(gone, i, math.min(i + 999, #gone)))
end
return cleared
