-- durable/persist_read_heads.lua: the heads of many conversations of one shard whose 'h|<conv>'
-- marks the drainer writes to PostgreSQL, in one step (a call per conversation was two round
-- trips per message of a one-to-one conversation: the head read, then its clear).
--
-- KEYS[1] the dirty set of the conversations' shard (routes the call; on a cluster the shard is a
-- slot, and every conversation marked in it lives in it)
-- ARGV[1] the head of a conversation's key name (keys.ts convKeyHead; convKeyAfterHead(head, conv) is the key)
-- ARGV[2] the conversations, joined by '\n' (ids never hold '\n')
-- Returns their heads ('#s') and generations ('#g', read with the head: PostgreSQL orders heads
-- by it, so one read before an operator's rebase cannot raise the lowered head), each
-- '<head> <gen> <at> <@all seqs> <non-counting seqs>' (issue 43: '#a', 0 = none, '#@' and '#N',
-- 'a,b' or empty), in order,
-- joined by '\n'; empty where the conversation is gone.

local head, out = ARGV[1], {}
for conv in string.gmatch(ARGV[2], '[^\n]+') do
  local fields = redis.call('HMGET', convKeyAfterHead(head, conv), '#s', '#g', '#a', '#@', '#N')
  out[#out + 1] = fields[1]
      and (fields[1] .. ' ' .. (fields[2] or '0') .. ' ' .. (fields[3] or '0') .. ' ' .. (fields[4] or '') .. ' ' .. (fields[5] or ''))
    or ''
end
return table.concat(out, '\n')
