-- durable/persist_read.lua: what the drainer writes to PostgreSQL for many marks of one shard,
-- read in this one step: each record's text and its user's write clock. One call per chunk, with
-- the marks packed in one argument and the answer in one string: the drainer's cost was its
-- round trips first, then the thousands of small strings a call sent and received.
--
-- KEYS[1] the dirty set of the marks' shard (routes the call: on a cluster the shard is a slot,
-- and every user of its marks lives in it; on one Redis the users' keys are reached by name).
-- ARGV[1] the head of a user's key names (keys.ts userKeyHead: head .. uid .. '}:m' is the meta
-- hash, '}:c' the records)
-- ARGV[2] the marks, 'uid|conv' members joined by '\n' (ids never hold '|' or '\n')
-- Returns a line per mark, in order, joined by '\n': '<w> <record text>', the text empty when the
-- record is gone, w '0' when the user has none.

local head, out, lastUid, w = ARGV[1], {}, nil, '0'
for uid, conv in string.gmatch(ARGV[2], '([^|\n]+)|([^\n]+)') do
  if uid ~= lastUid then
    w = redis.call('HGET', head .. uid .. '}:m', 'w') or '0'
    lastUid = uid
  end
  local text = redis.call('HGET', head .. uid .. '}:c', conv) or ''
  -- a record is never written with a newline; one written by hand must not break the framing
  if string.find(text, '\n', 1, true) then text = string.gsub(text, '\n', ' ') end
  out[#out + 1] = w .. ' ' .. text
end
return table.concat(out, '\n')
