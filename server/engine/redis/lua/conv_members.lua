-- conv_members.lua: one membership change of a conversation, atomically: create it if needed,
-- replace its category, add and remove members, decide write or read diffusion against the
-- threshold, and raise the membership generation when anything changed.
--
-- KEYS[1] the conversation hash: '#s' maxSeq, '#l' large 1|0, '#c' category, '#g' generation,
--         '#n' member count, '#r' generation of an unfinished member rewrite; and uid -> join tag
--         'joinGen|joinHead' per member (uids never start with '#')
-- KEYS[2] the dirty set of the conversation's slot (durable tier, server/durable/)
-- ARGV[1] threshold (more members -> read diffusion)   ARGV[2] 1 when a category is given, else 0
-- ARGV[3] category   ARGV[4] number of uids to add
-- ARGV[5] durable tier: now in ms ('' = off): a change is marked 'm|<conv>' in KEYS[2]
-- ARGV[6] 1: a conversation that does not exist is not created and the reply is 'absent' (the
--         caller restores it from PostgreSQL first); 0: create it
-- ARGV[7] the conversation id
-- ARGV[8] a topic's sync (sync/topics.ts): the parent's generation its roster was read at ('' =
--         a plain change). The uids to add are then the parent's whole roster: a sync older than
--         the one the conversation holds ('#P') changes nothing (no joins, and as leaves only the
--         uids to remove that are not members); otherwise every member not in the roster is
--         removed too (reported among the leaves) and '#P' takes it. A sync that raises '#P' marks
--         the roster dirty even when nothing else changed: PostgreSQL keeps '#P' with the roster
--         (parent_gen), so a child back from it refuses an older roster too.
-- ARGV[9] with ARGV[8], a delta sync ('' = a whole roster): the parent's generation before the
--         change whose adds and removals ARGV[10..] are (its step's `from`). Applied, as a plain
--         change, only where the conversation holds the roster of that generation or of ARGV[8]
--         already (a repeat); one holding an older roster (or none) answers 'behind' with nothing
--         written (the caller syncs the whole roster); one holding a newer is stale, as above.
-- ARGV[10..] distinct uids to add, then to remove
-- Returns {maxSeq, large 1|0, category, member count, gen, rewrite pending 1|0,
--          {uid, join tag, ...} for every uid added (an existing member keeps its tag),
--          last activity '#a' (ms, false = none: issue 43), the uids now removed (the asked ones, and a sync's),
--          the non-counting seqs '#N' when any lies above the head (a recall before its message:
--          a joiner's record takes them, as every member's did), else false,
--          the generation before this step (the delta a topic's child takes: sync/topics.ts),
--          1 when a delta sync found the conversation behind (nothing written, above), else 0}

local function int(n) return string.format('%d', n) end
local K = KEYS[1]
local threshold = tonumber(ARGV[1])
local meta = redis.call('HMGET', K, '#s', '#l', '#c', '#g', '#n', '#r', '#a', '#P')
local created = not meta[1]
if created and ARGV[6] == '1' then return 'absent' end
local FIRST = 10
local lastAdd = FIRST - 1 + tonumber(ARGV[4])
local sync = ARGV[8] ~= '' and tonumber(ARGV[8]) or nil
local syncFrom = ARGV[9] ~= '' and tonumber(ARGV[9]) or nil
local held = tonumber(meta[8] or '0')
local fromGen = tonumber(meta[4] or '0')
-- The reply of a step that changes nothing.
local function unchanged(leaves, behind)
  return { tonumber(meta[1] or '0'), meta[2] == '1' and 1 or 0, meta[3] or 'default', tonumber(meta[5] or '0'), fromGen, meta[6] and 1 or 0, {}, meta[7] or false, leaves, false, fromGen, behind }
end
if sync and not created and sync < held then
  -- A stale sync: a newer roster is in. Only the asked removals that hold are reported.
  local leaves = {}
  for k = lastAdd + 1, #ARGV do
    if redis.call('HEXISTS', K, ARGV[k]) == 0 then leaves[#leaves + 1] = ARGV[k] end
  end
  return unchanged(leaves, 0)
end
if syncFrom and (created or (held ~= syncFrom and held ~= sync)) then return unchanged({}, 1) end
local syncRaised = sync and (created or sync > held)
local extra = {}
if sync and not syncFrom and not created then
  -- Members the roster no longer has: removed with the asked removals.
  local inRoster = {}
  for k = FIRST, lastAdd do inRoster[ARGV[k]] = true end
  for _, field in ipairs(redis.call('HKEYS', K)) do
    if string.byte(field, 1) ~= 35 and not inRoster[field] then extra[#extra + 1] = field end -- 35: '#'
  end
end
if created then meta = { '0', '0', ARGV[2] == '1' and ARGV[3] or 'default', '0', '0', false } end
local changed = created
local maxSeq, wasLarge, category = tonumber(meta[1]), meta[2] == '1', meta[3]
local gen, count, rewrite = tonumber(meta[4]), tonumber(meta[5]), meta[6]
local categoryChanged = not created and ARGV[2] == '1' and ARGV[3] ~= category
if categoryChanged then category = ARGV[3] end

local nextGen = nextGeneration(gen)
local newTag = int(nextGen) .. '|' .. int(maxSeq)

-- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK 8000): work in chunks.
local CHUNK = 1000
local joins = {}
local i = FIRST
while i <= lastAdd do
  local j = math.min(i + CHUNK - 1, lastAdd)
  local tags = redis.call('HMGET', K, unpack(ARGV, i, j))
  local fresh = {}
  for k = i, j do
    local tag = tags[k - i + 1]
    if not tag then
      tag = newTag
      fresh[#fresh + 1] = ARGV[k]
      fresh[#fresh + 1] = tag
      count = count + 1
    end
    joins[#joins + 1] = ARGV[k]
    joins[#joins + 1] = tag
  end
  if #fresh > 0 then
    redis.call('HSET', K, unpack(fresh))
    changed = true
  end
  i = j + 1
end
local leaves = {}
for k = lastAdd + 1, #ARGV do leaves[#leaves + 1] = ARGV[k] end
for _, uid in ipairs(extra) do leaves[#leaves + 1] = uid end
i = 1
while i <= #leaves do
  local j = math.min(i + CHUNK - 1, #leaves)
  local removed = redis.call('HDEL', K, unpack(leaves, i, j))
  if removed > 0 then
    count = count - removed
    changed = true
  end
  i = j + 1
end
if sync then redis.call('HSET', K, '#P', string.format('%d', sync)) end

local large = count > threshold
local modeChanged = large ~= wasLarge
if changed or categoryChanged or modeChanged then
  gen = nextGen
  local fields = { '#s', int(maxSeq), '#l', large and '1' or '0', '#c', category, '#g', int(gen), '#n', int(count) }
  if categoryChanged or modeChanged then
    rewrite = int(gen)
    fields[#fields + 1] = '#r'
    fields[#fields + 1] = rewrite
  end
  redis.call('HSET', K, unpack(fields))
  -- Issue 43: the @all seqs counted while read-diffused stop counting with write diffusion
  -- (PROTOCOL.md State rules), and must not count again after a later switch back.
  if modeChanged and not large then redis.call('HDEL', K, '#@') end
  -- The head when it became read-diffused ('#L'): an @all at or below it was a write-diffused
  -- message, counted in its members' records (a redelivery must not count it again, conv_record.lua).
  -- So is the mention index's floor ('#M', conv_record.lua): the records hold the mentions made before.
  if modeChanged and large then redis.call('HSET', K, '#L', int(maxSeq), '#M', int(maxSeq)) end
end
if ARGV[5] ~= '' and (changed or categoryChanged or modeChanged or syncRaised) then redis.call('ZADD', KEYS[2], 'NX', ARGV[5], 'm|' .. ARGV[7]) end
local ahead = false
local nocount = redis.call('HGET', K, '#N')
if nocount and tonumber(string.match(nocount, '(%d+)$')) > maxSeq then ahead = nocount end
return { maxSeq, large and 1 or 0, category, count, gen, rewrite and 1 or 0, joins, meta[7] or false, leaves, ahead, fromGen, 0 }
