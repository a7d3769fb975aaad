-- lib/user.lua: what every user script shares. Not a script of its own: scripts.ts prepends it
-- to user_apply, pull, user_state and position when loading them (SCRIPTS[...].prelude), so the
-- line numbers in a Redis error for those scripts are off by this file's length.
--
-- The text formats are server/engine/state-text.ts's (record, state, snapshot); the rules are rules.ts's.

-- Lua numbers are doubles and tostring() keeps only 14 digits: format integers explicitly.
local function int(n) return string.format('%d', n) end

-- A user with no meta (never seen, or only pending records so far) has this epoch and version 0:
-- engine.ts UNSEEN_EPOCH. Asking about such a user writes nothing.
local UNSEEN = '0'

-- A new epoch: 12 hex characters, unique to this user, run and moment (an epoch only has to
-- differ from every earlier one of the user; it is never UNSEEN, which is 1 character long).
local function newEpoch(metaKey, runId)
  local t = redis.call('TIME')
  return string.sub(redis.sha1hex(runId .. '|' .. metaKey .. '|' .. t[1] .. '.' .. t[2]), 1, 12)
end

-- The epoch (redis-engine.ts "Epochs and the Redis run"): valid only under the Redis run it was
-- last used in, since a Redis that lost its last writes keeps the epoch but its version goes
-- back. So the user's first script in a new run starts a new epoch. No epoch at all: the user is
-- unseen, and nothing is written.
local function currentEpoch(metaKey, epoch, runIdThen, runId)
  if not epoch then return UNSEEN end
  if runIdThen ~= runId then
    epoch = newEpoch(metaKey, runId)
    redis.call('HSET', metaKey, 'e', epoch, 'r', runId)
  end
  return epoch
end

-- userMeta(metaKey, runId, field...): one HMGET of the user's meta hash (epoch, run id, version and
-- the extra fields named). Returns whether the user exists, the epoch (currentEpoch), the version
-- (0 when none) and the extra fields' raw values (false when absent).
local function userMeta(metaKey, runId, ...)
  local meta = redis.call('HMGET', metaKey, 'e', 'r', 'v', ...)
  local epoch = currentEpoch(metaKey, meta[1], meta[2], runId)
  return meta[1] ~= false, epoch, tonumber(meta[3] or '0'), unpack(meta, 4)
end

-- The mention list of every record that has none. Mention lists are never changed in place
-- (each change makes a new list), so one shared empty list saves a table per record decoded:
-- a script's cost is mostly its allocations (Lua's collector runs as it allocates).
local NO_MENTIONS = {}

local function decodeRecord(conv, raw)
  local f, ls, rs, ds, g, jg, cat, ms =
    string.match(raw, '^([01][01][01][01])|(%d+)|(%d+)|(%-?%d+)|(%d+)|(%d+)|([^|]*)|([%d,]*)$')
  if not f then error('malformed record of ' .. conv) end
  local seqs = NO_MENTIONS
  if ms ~= '' then
    seqs = {}
    for s in string.gmatch(ms, '%d+') do seqs[#seqs + 1] = tonumber(s) end
  end
  return {
    conv = conv, member = string.byte(f, 1) == 49, muted = string.byte(f, 2) == 49,
    marked = string.byte(f, 3) == 49, large = string.byte(f, 4) == 49,
    lastSeq = tonumber(ls), readSeq = tonumber(rs), deletedSeq = tonumber(ds),
    gen = tonumber(g), joinGen = tonumber(jg), category = cat == '' and 'default' or cat, mentions = seqs,
  }
end

local function bit(b) if b then return '1' end return '0' end

-- The default category is stored as '' (no category is empty): a few bytes in every record,
-- entry and snapshot line.
local function categoryText(c) if c == 'default' then return '' end return c end

local function mentionText(seqs)
  if #seqs == 0 then return '' end
  local texts = {}
  for i, s in ipairs(seqs) do texts[i] = int(s) end
  return table.concat(texts, ',')
end

-- One string.format per text: each piece concatenated apart is another string to allocate.
local function encodeRecord(r)
  return string.format('%s%s%s%s|%d|%d|%d|%d|%d|%s|%s', bit(r.member), bit(r.muted), bit(r.marked), bit(r.large),
    r.lastSeq, r.readSeq, r.deletedSeq, r.gen, r.joinGen, categoryText(r.category), mentionText(r.mentions))
end

-- The ConvState a client sees (state-text.ts "state").
local function stateText(r)
  return string.format('%s|%s%s%s|%d|%d|%d|%d|%s', r.conv, bit(r.muted), bit(r.marked), bit(r.large), r.lastSeq,
    r.readSeq, #r.mentions, r.deletedSeq, categoryText(r.category))
end

-- A stored record's state line (stateText) straight from its text, without decoding it; nil for
-- a record that is not a member's.
local function stateLine(conv, raw)
  local member, flags, ls, rs, ds, cat, ms =
    string.match(raw, '^([01])([01][01][01])|(%d+)|(%d+)|(%-?%d+)|%d+|%d+|([^|]*)|([%d,]*)$')
  if member ~= '1' then return nil end
  local mentions = 0
  if ms ~= '' then mentions = select(2, string.gsub(ms, ',', ',')) + 1 end
  return conv .. '|' .. flags .. '|' .. ls .. '|' .. rs .. '|' .. mentions .. '|' .. ds .. '|' .. cat
end

-- Every member conversation's state, one per line; `current` (conv -> record or false) holds
-- records changed by this script and not yet written back.
local function snapshotText(recordsKey, current)
  local all = redis.call('HGETALL', recordsKey)
  local lines = {}
  local seen = {}
  for i = 1, #all, 2 do
    local conv = all[i]
    local r = current[conv]
    seen[conv] = true
    local line
    if r == nil then line = stateLine(conv, all[i + 1]) elseif r and r.member then line = stateText(r) end
    if line then lines[#lines + 1] = line end
  end
  for conv, r in pairs(current) do
    if not seen[conv] and r and r.member then lines[#lines + 1] = stateText(r) end
  end
  return table.concat(lines, '\n')
end

-- rules.ts snapshotInterval.
local function snapshotInterval(snapshotEvery, streamMaxLen, members)
  return math.min(streamMaxLen, math.max(snapshotEvery, members))
end

-- rules.ts trimmedBase: history goes in steps of a quarter interval, never past the snapshot.
local function trimmedBase(base, version, sv, interval)
  if version - base <= interval + math.max(1, math.floor(interval / 4)) then return base end
  return math.min(sv, math.max(base, version - interval))
end

-- The stream list and its snapshot expire after STREAM_IDLE_SECONDS without changes, while the
-- records stay. When either is gone, history restarts at the current version: base and snapshot
-- move to it (a snapshot built from the records, `current` overriding what this script changed
-- and has not written), so a cursor at the current version continues and an older one gets that
-- snapshot. The caller writes the new base and snapshot version ('b', 'sv') to the meta.
local function restartStream(keys, current, idle)
  redis.call('DEL', keys.stream)
  local text = snapshotText(keys.records, current)
  if idle > 0 then redis.call('SET', keys.snapshot, text, 'EX', idle) else redis.call('SET', keys.snapshot, text) end
end
