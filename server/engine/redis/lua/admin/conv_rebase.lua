-- admin/conv_rebase.lua: the conversation step of an operator's rebase (admin/rebase.ts): lower
-- the head '#s' to ARGV[1] when it is above, and start every member over at a new generation:
-- '#g' and each member's join tag become that generation, join heads at most the new head. A
-- message recorded before this step carries an older generation than the tags now hold, so the
-- rebased records ignore it (rules.ts): the old head cannot come back through it. What the
-- conversation keeps of seqs above the new head goes (issue 43, below).
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] the dirty set of its slot (durable tier)
-- ARGV[1] the seq to lower the head to   ARGV[2] durable tier: now in ms ('' = off): the roster
--         (head, generation, tags) is marked 'm|<conv>' in KEYS[2]   ARGV[3] the conversation id
-- Returns nil (no such conversation) or {head before, head after, gen, large 1|0, category,
--          {uid, join tag, ...}}

local function int(n) return string.format('%d', n) end
local K = KEYS[1]
local meta = redis.call('HMGET', K, '#s', '#l', '#c', '#g')
if not meta[1] then return nil end
local before = tonumber(meta[1])
local head = math.min(before, tonumber(ARGV[1]))
-- Newer than every generation given (lib/user.lua).
local gen = nextGeneration(tonumber(meta[4] or '0'))

local all = redis.call('HGETALL', K)
local tags, out = {}, {}
for i = 1, #all, 2 do
  local uid = all[i]
  if string.sub(uid, 1, 1) ~= '#' then
    local joinHead = tonumber(string.match(all[i + 1], '|(%d+)$'))
    local tag = int(gen) .. '|' .. int(math.min(joinHead, head))
    tags[#tags + 1] = uid
    tags[#tags + 1] = tag
    out[#out + 1] = uid
    out[#out + 1] = tag
  end
end
hsetChunks(K, tags)
redis.call('HSET', K, '#s', int(head), '#g', int(gen))
-- Seqs above the new head will be other messages (rules.ts lowerTo): what the conversation kept
-- of them goes (issue 43): non-counting and @all seqs, indexed mentions; the heads '#L' and '#M'
-- name are lowered with it (memory-admin.ts does the same).
local kept = redis.call('HMGET', K, '#N', '#@', '#L', '#M')
for f, field in ipairs({ '#N', '#@' }) do
  if kept[f] then
    local below = {}
    for text in string.gmatch(kept[f], '%d+') do
      if tonumber(text) <= head then below[#below + 1] = text end
    end
    if #below == 0 then redis.call('HDEL', K, field) else redis.call('HSET', K, field, table.concat(below, ',')) end
  end
end
for f, field in ipairs({ '#L', '#M' }) do
  if kept[f + 2] and tonumber(kept[f + 2]) > head then redis.call('HSET', K, field, int(head)) end
end
redis.call('ZREMRANGEBYSCORE', K .. ':m', '(' .. int(head), '+inf')
if ARGV[2] ~= '' then redis.call('ZADD', KEYS[2], 'NX', ARGV[2], 'm|' .. ARGV[3]) end
return { before, head, gen, meta[2] == '1' and 1 or 0, meta[3] or 'default', out }
