-- durable/conv_restore.lua: put back a conversation that Redis no longer has from its PostgreSQL
-- rows, atomically. One that exists again (restored by another process first) keeps what Redis
-- holds, which is newer; only its head is max-merged.
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] the evicted set of its slot (it leaves it)
-- KEYS[3] its read positions (reads_raise.lua), put back in this step with the hash
-- KEYS[4] its topic registry (topic_add.lua), put back in this step too: a registry_list.lua that
-- finds the conversation finds every topic PostgreSQL holds
-- KEYS[5] its thread registry (thread_add.lua), likewise: every root PostgreSQL holds, as '1'
-- ARGV[1] maxSeq   ARGV[2] large 1|0   ARGV[3] category   ARGV[4] generation
-- ARGV[5] generation of an unfinished member rewrite ('' = none)   ARGV[6] its member of the evicted set (keys.ts evictedConvMember)
-- ARGV[7] its stamp in the evicted set when the caller began to read PostgreSQL ('' = none)
-- ARGV[8] last activity '#a' ('' or '0' = none)   ARGV[9] @all seqs '#@' ('' = none)
-- ARGV[10] the head when it became read-diffused '#L' (issue 43)
-- ARGV[11] the non-counting seqs '#N' ('' = none; issue 43)
-- ARGV[12] a topic's child: the parent generation of the newest roster synced into it '#P' ('0' =
-- none), put back in this step: a sync that finds the child restored finds what it held
-- ARGV[13] P, the number of read positions, then P pairs uid, seq (members who share)
-- then T, the number of topics, then T topics (each restored as '0', not known complete: its
-- next message creates its child again from the roster, which changes nothing if it was)
-- then R, the number of thread roots, then R roots
-- then uid, join tag, ... (the members)
-- Returns 1 when restored, 0 when it existed, 3 when it was evicted again since the caller read
-- PostgreSQL (nothing written: read it again).

local K = KEYS[1]
local current = redis.call('HGET', K, '#s')
if current then
  if tonumber(ARGV[1]) > tonumber(current) then redis.call('HSET', K, '#s', ARGV[1]) end
  local at = redis.call('HGET', K, '#a')
  if ARGV[8] ~= '' and ARGV[8] ~= '0' and (not at or tonumber(ARGV[8]) > tonumber(at)) then redis.call('HSET', K, '#a', ARGV[8]) end
  return 0
end
if evictedSince(KEYS[2], ARGV[6], ARGV[7]) then return 3 end
local positions = tonumber(ARGV[13])
local topicsAt = 14 + 2 * positions
for i = 14, topicsAt - 1, 2 do
  redis.call('ZADD', KEYS[3], 'GT', ARGV[i + 1], ARGV[i])
end
local threadsAt = topicsAt + 1 + tonumber(ARGV[topicsAt])
for i = topicsAt + 1, threadsAt - 1 do
  redis.call('HSETNX', KEYS[4], ARGV[i], '0')
end
local first = threadsAt + 1 + tonumber(ARGV[threadsAt])
for i = threadsAt + 1, first - 1 do
  redis.call('HSET', KEYS[5], ARGV[i], '1')
end
local count = 0
for i = first, #ARGV, 1000 do
  local j = math.min(i + 999, #ARGV)
  redis.call('HSET', K, unpack(ARGV, i, j))
  count = count + (j - i + 1) / 2
end
-- '#M': PostgreSQL does not keep the mention index (conv_record.lua), so it holds no mention of
-- a seq up to the restored head: a recall of one reaches every member.
local fields = { '#s', ARGV[1], '#l', ARGV[2], '#c', ARGV[3], '#g', ARGV[4], '#n', string.format('%d', count), '#M', ARGV[1] }
if ARGV[5] ~= '' then
  fields[#fields + 1] = '#r'
  fields[#fields + 1] = ARGV[5]
end
if ARGV[8] ~= '' and ARGV[8] ~= '0' then
  fields[#fields + 1] = '#a'
  fields[#fields + 1] = ARGV[8]
end
if ARGV[9] ~= '' then
  fields[#fields + 1] = '#@'
  fields[#fields + 1] = ARGV[9]
end
if ARGV[10] ~= '0' then
  fields[#fields + 1] = '#L'
  fields[#fields + 1] = ARGV[10]
end
if ARGV[11] ~= '' then
  fields[#fields + 1] = '#N'
  fields[#fields + 1] = ARGV[11]
end
if ARGV[12] ~= '0' then
  fields[#fields + 1] = '#P'
  fields[#fields + 1] = ARGV[12]
end
redis.call('HSET', K, unpack(fields))
redis.call('ZREM', KEYS[2], ARGV[6])
return 1
