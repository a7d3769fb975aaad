-- durable/persist_take.lua: the drainer's next record marks of one shard and the records they
-- name, read in this one step. The marks come from the dirty set here rather than from the
-- drainer, so a mark crosses the wire once, and the answer is one string: the drainer's cost was
-- its round trips first, then the thousands of small strings a call sent and received.
--
-- A mark's score is the user's write clock `w` at its record's last change (lib/user.lua
-- markDirty): the version of the record as read here, and the row's version in PostgreSQL. So
-- the user's own clock is not read: one command per mark (the record), where each command a
-- script runs costs more than the lookup itself.
--
-- KEYS[1] the dirty set of the shard (routes the call: on a cluster the shard is a slot, and every
-- user of its marks lives in it; on one Redis the users' keys are reached by name)
-- ARGV[1] the head of a user's key names (keys.ts userKeyHead; userRecordsAfterHead(head, uid) is the
-- records hash)
-- ARGV[2] how many of the oldest marks to skip (the drainer's own in flight), ARGV[3] how many to take
-- Returns a line per mark, oldest first, joined by '\n': '<score> <uid|conv> <record text>',
-- the text empty when the record is gone.

local head, skip = ARGV[1], tonumber(ARGV[2])
local marks = redis.call('ZRANGE', KEYS[1], skip, skip + tonumber(ARGV[3]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #marks, 2 do
  local member = marks[i]
  local bar = string.find(member, '|', 1, true)
  local text = redis.call('HGET', userRecordsAfterHead(head, string.sub(member, 1, bar - 1)), string.sub(member, bar + 1)) or ''
  -- a record is never written with a newline; one written by hand must not break the framing
  if string.find(text, '\n', 1, true) then text = string.gsub(text, '\n', ' ') end
  out[#out + 1] = marks[i + 1] .. ' ' .. member .. ' ' .. text
end
return table.concat(out, '\n')
