-- durable/persist_clear.lua: after PostgreSQL committed what persist_take read, clear the dirty
-- marks of the records not changed since: a mark's score is the write clock of its record's last
-- change (lib/user.lua markDirty), so a record changed since, even back to the same text, has a
-- larger one and keeps its mark; the next drain writes the newer state. Many marks of one shard
-- per call, packed in one string.
--
-- KEYS[1] the dirty set of the marks' shard
-- ARGV[1] a line per mark, joined by '\n': 'uid|conv <score as taken>'
-- Returns how many marks were cleared.

local members, scores = {}, {}
for member, score in string.gmatch(ARGV[1], '([^ \n]+) ([^\n]+)') do
  members[#members + 1] = member
  scores[#scores + 1] = score
end
-- One ZMSCORE and one ZREM per chunk of marks, not a ZSCORE per mark: each command a script
-- runs costs ~8k instructions around it, more than the lookup itself.
local CHUNK = 1000
local cleared = 0
for i = 1, #members, CHUNK do
  local last = math.min(i + CHUNK - 1, #members)
  local now = redis.call('ZMSCORE', KEYS[1], unpack(members, i, last))
  local gone = {}
  for j = i, last do
    local current = now[j - i + 1]
    -- A score taken comes back as Redis formats it (persist_take's ZRANGE), and the drainer
    -- sends that text back: one string compare, no text-to-number parse per mark (~1.5k
    -- instructions each). Only texts that differ are compared as numbers ('1e3' and '1000'
    -- are one score), so a score written in another form is still cleared.
    if current and (current == scores[j] or tonumber(current) == tonumber(scores[j])) then gone[#gone + 1] = members[j] end
  end
  if #gone > 0 then cleared = cleared + redis.call('ZREM', KEYS[1], unpack(gone)) end
end
return cleared
