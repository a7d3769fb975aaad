-- durable/user_restore.lua: put back a user that Redis no longer has (wiped, replaced, failed
-- over, or evicted as cold) from its PostgreSQL rows, atomically, under a new epoch. A user that
-- has meta again (another process restored it first, or created it) is left alone: what Redis
-- holds then is newer than the rows. lib/user.lua and lib/rebuild.lua come first in the library.
--
-- KEYS[1] m  KEYS[2] c  KEYS[3] s  KEYS[4] p  KEYS[5] L  (layouts: user_apply.lua)
-- ARGV[1] the new epoch   ARGV[2] the Redis run id   ARGV[3] idle seconds (0: never)
-- ARGV[4] notification channel ('' = none)   ARGV[5] PUBLISH or SPUBLISH
-- ARGV[6] the largest write clock w among the rows   ARGV[7] now in ms
-- ARGV[8] the activity set of the user's slot ('' = none)   ARGV[9] uid
-- ARGV[10] the evicted set of the user's slot (the user leaves it)
-- ARGV[11] the user's stamp in it when the caller began to read PostgreSQL ('' = none)
-- ARGV[12..] conv, record text (state-text.ts), ...
-- Returns 1 when restored, 2 when the rows hold no membership (records written, the user stays
-- unseen), 0 when Redis has the user already, 3 when the user was evicted again since the caller
-- read PostgreSQL (nothing written: read it again).

if redis.call('HEXISTS', KEYS[1], 'e') == 1 then return 0 end
if evictedSince(ARGV[10], ARGV[9], ARGV[11]) then return 3 end

-- A record Redis kept without the user's meta (a message that reached a member before its join,
-- or newer than the rows when only the meta was lost) is merged: the registers are max-registers,
-- and the newer membership generation decides the rest. Within one membership the sets are
-- unions (rules.ts: mentions and non-counting seqs only grow), the read register decides which
-- mentions are spent (rules.ts setRead/raiseRead partition them the same way), and a mention in
-- a non-counting seq is dropped (rules.ts, the message and recall ops).
local function merged(conv, kept, restored)
  local a, b = decodeRecord(conv, kept), decodeRecord(conv, restored)
  local base = tonumber(a.gen) > tonumber(b.gen) and a or b
  base.lastSeq = max(a.lastSeq, b.lastSeq)
  -- The last activity is a max-register (issue 43); the level comes with the newer generation.
  local at = max(a.at or 0, b.at or 0)
  base.at = at > 0 and at or nil
  -- The read register (readGen, readSeq) is compared lexicographically (rules.ts mergeRead).
  local r = (a.readGen > b.readGen or (a.readGen == b.readGen and a.readSeq > b.readSeq)) and a or b
  base.readGen, base.readSeq = r.readGen, r.readSeq
  if a.joinGen ~= b.joinGen then
    -- Another membership: the newer one's sets alone (a rejoin starts over).
    base.mentions = keepAbove(base.mentions, base.readSeq)
    local spent = {}
    for _, s in ipairs(base.readMentions) do
      if s <= base.readSeq then spent[#spent + 1] = s end
    end
    base.readMentions = spent
    return (encodeRecord(base))
  end
  -- deletedSeq is a max-register within one membership; what the user deleted stays read.
  base.deletedSeq = max(a.deletedSeq, b.deletedSeq)
  base.readSeq = max(base.readSeq, base.deletedSeq, 0)
  local nocount = mergeNocount(a.nocount, concat(b.nocount or NO_MENTIONS, ','))
  base.nocount = #nocount > 0 and nocount or nil
  local gone = {}
  for _, s in ipairs(nocount) do gone[s] = true end
  local seen, above, spent = {}, {}, {}
  for _, list in ipairs({ a.mentions, a.readMentions, b.mentions, b.readMentions }) do
    for _, s in ipairs(list) do
      if not seen[s] and not gone[s] then
        seen[s] = true
        if s > base.readSeq then above[#above + 1] = s else spent[#spent + 1] = s end
      end
    end
  end
  table.sort(above)
  table.sort(spent)
  -- lib/apply.lua's newest, with the cap spelled out: a restore is no user step, so `mentionCap` is unset.
  base.mentions, base.readMentions = newest(above, MENTION_CAP), newest(spent, MENTION_CAP)
  return (encodeRecord(base))
end

local fields = {}
for i = 12, #ARGV, 2 do
  local conv, text = ARGV[i], ARGV[i + 1]
  local kept = call('HGET', KEYS[2], conv)
  fields[#fields + 1] = conv
  fields[#fields + 1] = kept and merged(conv, kept, text) or text
  if #fields >= 1000 then
    call('HSET', KEYS[2], unpack(fields))
    fields = {}
  end
end
if #fields > 0 then call('HSET', KEYS[2], unpack(fields)) end

local keys = { meta = KEYS[1], records = KEYS[2], stream = KEYS[3], snapshot = KEYS[4], large = KEYS[5] }
local nowMs = tonumber(ARGV[7])
local restored = rebuildUser(keys, ARGV[1], ARGV[2], true, tonumber(ARGV[3]), ARGV[4], ARGV[5])
-- The write clock past every row's, and the activity now (a user with no membership gets a meta
-- of only these, as before the restore).
local v, b, n, sv, ex, t, x, kd, _, _, legacy = counters(KEYS[1], call('HGET', KEYS[1], META_PACKED))
writeCounters(KEYS[1], legacy, v, b, n, sv, ex, t, x, kd, nextWrite(tonumber(ARGV[6]), nowMs), nowMs)
if restored == 1 and ARGV[8] ~= '' then call('ZADD', ARGV[8], nowMs, ARGV[9]) end
call('ZREM', ARGV[10], ARGV[9])
return restored == 1 and 1 or 2
