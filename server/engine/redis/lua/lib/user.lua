-- lib/user.lua: what every user script shares. Not a script of its own: scripts.ts puts it (then
-- lib/rebuild.lua) at the top of the Redis Functions library, once, before every function.
--
-- The text formats are server/engine/state-text.ts's (record, state, snapshot); the rules are rules.ts's.

-- Globals the hot paths use, as locals: a global is a table lookup at every use. Redis runs a
-- library's top level at FUNCTION LOAD with none of the standard globals, so they are bound on
-- a function's first call (bindGlobals, from every callback: scripts.ts); a library's locals
-- persist between its calls.
local tonumber, unpack, ipairs, pairs, error
local call, rpcall
local format, match, gmatch, byte, sub, find
local max, min, floor, concat
local spack, sunpack

local function bindGlobals()
  local G = _G
  spack, sunpack = struct.pack, struct.unpack
  tonumber, unpack, ipairs, pairs, error = G.tonumber, G.unpack, G.ipairs, G.pairs, G.error
  call, rpcall = redis.call, redis.pcall
  format, match, gmatch, byte, sub, find = string.format, string.match, string.gmatch, string.byte, string.sub, string.find
  max, min, floor, concat = math.max, math.min, math.floor, table.concat
end

-- Lua numbers are doubles and tostring() keeps only 14 digits: format integers explicitly.
-- The commonest values (0, -1: never deleted) without the sprintf (~2k instructions a call).
local function int(n)
  if n == 0 then return '0' elseif n == -1 then return '-1' end
  return format('%d', n)
end

-- Redis's clock in ms (claims' deadlines are taken on it, so every master judges them alike).
local function redisNowMs()
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end

-- A conversation's membership generation after `gen` (conv_members.lua, conv_rebase.lua): from
-- the clock (ms), not from 1, so generations also order records against a conversation recreated
-- after a store lost it; always above `gen`.
local function nextGeneration(gen)
  return math.max(gen + 1, redisNowMs())
end

-- HSET of a flat field/value list of any length: unpack() is bounded by the Lua C stack
-- (LUAI_MAXCSTACK 8000), so in chunks of 1000.
local function hsetChunks(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HSET', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end

-- The stamp of an eviction in the slot's evicted set (keys.ts evictedKey): Redis's clock in µs,
-- as an exact decimal. No two evictions of one key share it (a restore lies between them).
local function evictionStamp()
  local t = call('TIME')
  return t[1] .. format('%06d', tonumber(t[2]))
end

-- A restore saw `seen` as the key's evicted stamp ('' = none) before it read PostgreSQL. Another
-- stamp now means the key was restored, changed, drained and evicted again in between: what the
-- restore read is older than what PostgreSQL holds, and must be read again.
local function evictedSince(evicted, member, seen)
  return (call('ZSCORE', evicted, member) or '') ~= seen
end

-- A stored or argument number: tonumber is a strtod call (about 1,000 instructions, a large
-- part of a script's cost), and the commonest texts (absent, 0, 1, -1) need none.
-- Past those, `s + 0` (one strtod; tonumber of a text is two): every text here is a number the
-- engine wrote or sent.
local function num(s)
  if not s or s == '0' then return 0 elseif s == '1' then return 1 elseif s == '-1' then return -1 end
  return s + 0
end

-- A call's settings (snapshotEvery, streamMaxLen, the mention cap, ...) are texts in every call
-- and the same in nearly every call: their numbers are kept by text, so most calls look them up
-- (a table get of an interned string) instead of parsing them (Lua 5.1's tonumber of a text is
-- two strtod calls, ~930 instructions). Bounded: a text that is not a setting only costs a reset.
local settingsSeen, settingsCount = {}, 0
local function setting(s)
  local v = settingsSeen[s]
  if v then return v end
  v = tonumber(s)
  if settingsCount >= 64 then settingsSeen, settingsCount = {}, 0 end
  settingsSeen[s] = v
  settingsCount = settingsCount + 1
  return v
end

-- A user with no meta (never seen, or only pending records so far) has this epoch and version 0:
-- engine.ts UNSEEN_EPOCH. Asking about such a user writes nothing.
local UNSEEN = '0'

-- A new epoch: 12 hex characters, unique to this user, run and moment (an epoch only has to
-- differ from every earlier one of the user; it is never UNSEEN, which is 1 character long).
local function newEpoch(metaKey, runId)
  local t = call('TIME')
  return sub(redis.sha1hex(runId .. '|' .. metaKey .. '|' .. t[1] .. '.' .. t[2]), 1, 12)
end

-- The epoch (redis-engine.ts "Epochs and the Redis run"): valid only under the Redis run it was
-- last used in, since a Redis that lost its last writes keeps the epoch but its version goes
-- back. So the user's first script in a new run starts a new epoch. No epoch at all: the user is
-- unseen, and nothing is written.
local function currentEpoch(metaKey, epoch, runIdThen, runId)
  if not epoch then return UNSEEN end
  if runIdThen ~= runId then
    epoch = newEpoch(metaKey, runId)
    call('HSET', metaKey, 'e', epoch, 'r', runId)
  end
  return epoch
end

-- The user's counters (server/engine/redis/user-meta.ts, which declares them in this order):
-- version, base, members, snapshot version, stream expiry (s), total, mentions, the default
-- category's total, the write clock w and the last activity (ms). From the meta's packed field
-- when it has one: one struct.unpack, no number texts to parse. Otherwise from the text fields
-- of a meta written before the packing (or none: zeros), and the last value says whether that
-- meta had any (writeCounters then drops them).
local function counters(metaKey, packed)
  if packed then
    local v, b, n, sv, ex, t, x, kd, w, a = sunpack(META_PACK, packed)
    return v, b, n, sv, ex, t, x, kd, w, a, false
  end
  -- Most metas without the packed field do not exist at all (a user's first op): one EXISTS
  -- (~5k instructions) instead of the old fields' HMGET (~27k).
  if call('EXISTS', metaKey) == 0 then return 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false end
  local old = call('HMGET', metaKey, unpack(META_LEGACY))
  local legacy = false
  for i = 1, #META_LEGACY do
    if old[i] then legacy = true end
  end
  return num(old[1]), num(old[2]), num(old[3]), num(old[4]), num(old[5]), num(old[6]), num(old[7]),
    num(old[8]), num(old[9]), num(old[10]), legacy
end

-- Writes the counters (counters' order), and the field/value pairs after them, in one HSET; a
-- meta that still had the text fields of before the packing loses them in the same step.
local function writeCounters(metaKey, legacy, v, b, n, sv, ex, t, x, kd, w, a, ...)
  call('HSET', metaKey, META_PACKED, spack(META_PACK, v, b, n, sv, ex, t, x, kd, w, a), ...)
  if legacy then call('HDEL', metaKey, unpack(META_LEGACY)) end
end

-- userMeta(metaKey, runId): one HMGET of the user's meta hash (epoch, run id, packed counters).
-- Returns whether the user exists, the epoch (currentEpoch), then counters().
local function userMeta(metaKey, runId)
  local meta = call('HMGET', metaKey, 'e', 'r', META_PACKED)
  local epoch = currentEpoch(metaKey, meta[1], meta[2], runId)
  return meta[1] ~= false, epoch, counters(metaKey, meta[3])
end

-- pull.lua's and user_state.lua's heads: appends `conv` and its head (the conversation hash's
-- '#s', conv_members.lua) to the pair list `heads`; nothing for a conversation Redis lacks (the
-- caller reads it with heads(), which restores it when the durable tier is on).
-- `convKeyHead` is keys.ts convKeyHead.
local function appendHead(heads, convKeyHead, conv)
  local head = call('HGET', convKeyAfterHead(convKeyHead, conv), '#s')
  if head then
    heads[#heads + 1] = conv
    heads[#heads + 1] = head
  end
end

-- The mention list of every record that has none. Mention lists are never changed in place
-- (each change makes a new list), so one shared empty list saves a table per record decoded:
-- a script's cost is mostly its allocations (Lua's collector runs as it allocates).
local NO_MENTIONS = {}

-- A record also carries its text as stored (`text`) and whether a script changed it since
-- (`dirty`), in the same table: one table per record, made by one constructor.
-- gen and joinGen stay texts (canonical '%d' integers): only a membership op reads them as
-- numbers, and each tonumber/format is a strtod/sprintf call, a large part of a script's cost.
local function seqList(text)
  if text == '' then return NO_MENTIONS end
  local seqs = {}
  for s in gmatch(text, '%d+') do seqs[#seqs + 1] = tonumber(s) end
  return seqs
end

-- The level character (state-text.ts): '0' all, '1' none (muted), '2' mentions only.
local function decodeRecord(conv, raw)
  -- The flags are read as bytes, not captured: each capture is a string made (~850 instructions).
  -- One pass over the base layout; its end position says whether an extension follows.
  local ls, rs, ds, g, jg, cat, ms, tail = match(raw, '^[01][012][01][01]|(%d+)|(%d+)|(%-?%d+)|(%d+)|(%d+)|([^|]*)|([%d,]*)()')
  if not ls then error('malformed record of ' .. conv) end
  local rg, rms, at, nc = 0, NO_MENTIONS, 0, nil
  if tail <= #raw then
    -- state-text.ts: the read register's extension (readGen, spent mentions), then the last
    -- activity `at` (issue 43), then the non-counting seqs; each part read from where the last
    -- ended (short matches on the tail, not the whole record again).
    local rgText, rmsText, after = match(raw, '^|(%d+)|([%d,]*)()', tail)
    if not rgText then error('malformed record of ' .. conv) end
    rg, rms = num(rgText), seqList(rmsText)
    if after <= #raw then
      local atText, afterAt = match(raw, '^|(%d+)()', after)
      if not atText then error('malformed record of ' .. conv) end
      at = atText + 0
      if afterAt <= #raw then
        local ncText = match(raw, '^|([%d,]+)$', afterAt)
        if not ncText then error('malformed record of ' .. conv) end
        nc = seqList(ncText)
      end
    end
  end
  local f1, f2, f3, f4 = byte(raw, 1, 4)
  local r = {
    conv = conv, member = f1 == 49, muted = f2 == 49, marked = f3 == 49, large = f4 == 49,
    lastSeq = num(ls), readSeq = num(rs), deletedSeq = num(ds),
    gen = g, joinGen = jg, category = cat == '' and 'default' or cat, mentions = seqList(ms),
    readGen = rg, readMentions = rms, text = raw, dirty = false,
  }
  -- Issue 43's fields only when set (nil otherwise): 16 fields fit the constructor's 16 hash
  -- slots, 18 took 32, an allocation and its clearing in every record decoded (~+4% a message).
  if f2 == 50 then r.mentionsOnly = true end
  if at > 0 then r.at = at end
  if nc then r.nocount = nc end
  return r
end

-- rules.ts nocountAbove: the record's non-counting seqs in (readSeq, lastSeq] (nocount: nil when none).
local function nocountAbove(r)
  local seqs = r.nocount
  if not seqs then return 0 end
  local n = 0
  for _, s in ipairs(seqs) do
    if s > r.readSeq and s <= r.lastSeq then n = n + 1 end
  end
  return n
end

-- conv_record.lua's '#@' (a read-diffused conversation's @all seqs) merged with `added` ('a,b'),
-- only seqs above `floor`: distinct, ascending, the newest MENTION_CAP. Made once with the library.
local function mergeAllSeqs(stored, added, floor)
  local seen, list = {}, {}
  for text in gmatch((stored or '') .. ',' .. added, '%d+') do
    local s = tonumber(text)
    if s > floor and not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  table.sort(list)
  local texts = {}
  for k = max(1, #list - MENTION_CAP + 1), #list do texts[#texts + 1] = int(list[k]) end
  return concat(texts, ',')
end

-- conv_record.lua's '#N' (a conversation's non-counting seqs, issue 43) merged with `added`
-- ('a,b'): distinct, ascending, the newest NOCOUNT_CAP (rules.ts mergeNocount), as text.
local function mergeNocountText(stored, added)
  local seen, list = {}, {}
  for text in gmatch((stored or '') .. ',' .. added, '%d+') do
    local s = tonumber(text)
    if not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  table.sort(list)
  local texts = {}
  for k = max(1, #list - NOCOUNT_CAP + 1), #list do texts[#texts + 1] = int(list[k]) end
  return concat(texts, ',')
end

-- rules.ts contribution(): unread, mentions, category of what a record adds to the stored totals
-- (lib/apply.lua's user step and lib/rebuild.lua's rebuild).
local function contribution(r)
  if not r or not r.member or r.large or r.muted or r.lastSeq <= r.deletedSeq then return 0, 0, nil end
  -- Mentions only: each unread mention is one unread of the badge. rules.ts countsMentionsOnly:
  -- the stored bit names the other level than the row's default, which is mentions on a thread's row.
  local only = r.mentionsOnly or false
  if find(r.conv, THREAD_MARK, 2, true) then only = not only end
  if only then return #r.mentions, #r.mentions, r.category end
  return max(0, r.lastSeq - r.readSeq - nocountAbove(r)), #r.mentions, r.category
end

-- rules.ts claimLive: `claim` is the stored 'deadline|gen', `recordGen` the record's gen text now.
local function claimLive(claim, recordGen, now)
  local deadline, gen = match(claim, '^(%d+)|(%d+)$')
  return now < tonumber(deadline) and recordGen == gen
end

-- The user's join claims (user_claim.lua's hash) judged by claimLive against the user's records:
-- how many live ones name a conversation other than `conv`, whether `conv`'s is live, and the
-- conversations of the spent or lapsed ones. user_claim.lua decides with it; cold_evict.lua keeps
-- a user with a live claim (a join in flight). `within` (nil or ''  for all): only the live claims
-- of conversations whose id starts with it are counted (a thread follow's cap).
local function judgeClaims(claimsKey, recordsKey, conv, now, within)
  local claims = call('HGETALL', claimsKey)
  local others, mine, gone = 0, false, {}
  for i = 1, #claims, 2 do
    local c = claims[i]
    local raw = call('HGET', recordsKey, c)
    if not claimLive(claims[i + 1], raw and decodeRecord(c, raw).gen or '0', now) then
      gone[#gone + 1] = c
    elseif c == conv then
      mine = true
    elseif not within or within == '' or string.sub(c, 1, #within) == within then
      others = others + 1
    end
  end
  return others, mine, gone
end

-- A flag's text: a table lookup, not a function call (record flags are always booleans).
local BIT = { [true] = '1', [false] = '0' }
-- The level character is BIT[r.muted], or '2' for mentions only: written inline below (a
-- function call per record and state text is a cost every message pays).

-- The default category is stored as '' (no category is empty): a few bytes in every record,
-- entry and snapshot line.
local function categoryText(c) if c == 'default' then return '' end return c end

local function mentionText(seqs)
  if #seqs == 0 then return '' end
  local texts = {}
  for i, s in ipairs(seqs) do texts[i] = int(s) end
  return concat(texts, ',')
end

-- The record text, and the texts of lastSeq, readSeq and deletedSeq, which the state text
-- (stateTextOf) repeats: each number is formatted once. Concatenation, not string.format: one
-- OP_CONCAT builds the whole text, where format parses its pattern and calls sprintf per %d.
local function encodeRecord(r)
  local ls, rs, ds = int(r.lastSeq), int(r.readSeq), int(r.deletedSeq)
  local text = BIT[r.member] .. (r.mentionsOnly and '2' or BIT[r.muted]) .. BIT[r.marked] .. BIT[r.large] .. '|' .. ls .. '|' .. rs .. '|' .. ds .. '|'
    .. r.gen .. '|' .. r.joinGen .. '|' .. categoryText(r.category) .. '|' .. mentionText(r.mentions)
  local at, nc = r.at, r.nocount
  if r.readGen ~= 0 or #r.readMentions > 0 or at or nc then text = text .. '|' .. int(r.readGen) .. '|' .. mentionText(r.readMentions) end
  if at or nc then text = text .. '|' .. int(at or 0) end
  if nc then text = text .. '|' .. mentionText(nc) end
  return text, ls, rs, ds
end

-- The ConvState a client sees (state-text.ts "state"), from the number texts encodeRecord made.
local function stateTextOf(r, ls, rs, ds)
  local mentions = #r.mentions
  local text = r.conv .. '|' .. (r.mentionsOnly and '2' or BIT[r.muted]) .. BIT[r.marked] .. BIT[r.large] .. '|' .. ls .. '|' .. rs .. '|'
    .. (mentions == 0 and '0' or int(mentions)) .. '|' .. ds .. '|' .. categoryText(r.category)
  if r.nocount then
    local n = nocountAbove(r)
    if n > 0 then return text .. '|' .. int(r.readGen) .. '|' .. int(r.at or 0) .. '|' .. int(n) end
  end
  if r.at then return text .. '|' .. int(r.readGen) .. '|' .. int(r.at) end
  if r.readGen ~= 0 then return text .. '|' .. int(r.readGen) end
  return text
end

local function stateText(r)
  return stateTextOf(r, int(r.lastSeq), int(r.readSeq), int(r.deletedSeq))
end

-- A stored record's state line (stateText) straight from its text, without decoding it; nil for
-- a record that is not a member's.
local function stateLine(conv, raw)
  local member, flags, ls, rs, ds, cat, ms =
    match(raw, '^([01])([012][01][01])|(%d+)|(%d+)|(%-?%d+)|%d+|%d+|([^|]*)|([%d,]*)$')
  local rg, at
  if not member then
    -- The read register's extension (state-text.ts): the state shows readGen when above 0, and
    -- the last activity after it.
    member, flags, ls, rs, ds, cat, ms, rg, at =
      match(raw, '^([01])([012][01][01])|(%d+)|(%d+)|(%-?%d+)|%d+|%d+|([^|]*)|([%d,]*)|(%d+)|[%d,]*|?(%d*)$')
  end
  if not member then
    -- Issue 43: with non-counting seqs (rare): decoded, and shown by stateText.
    if not match(raw, '^1') then return nil end
    return stateText(decodeRecord(conv, raw))
  end
  if member ~= '1' then return nil end
  local mentions = 0
  if ms ~= '' then mentions = select(2, string.gsub(ms, ',', ',')) + 1 end
  local line = conv .. '|' .. flags .. '|' .. ls .. '|' .. rs .. '|' .. mentions .. '|' .. ds .. '|' .. cat
  if at and at ~= '' and at ~= '0' then return line .. '|' .. rg .. '|' .. at end
  if rg and rg ~= '0' then return line .. '|' .. rg end
  return line
end

-- Every member conversation's state, one per line; `current` (conv -> record or false) holds
-- records changed by this script and not yet written back.
local function snapshotText(recordsKey, current)
  local all = call('HGETALL', recordsKey)
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
  return concat(lines, '\n')
end

-- rules.ts snapshotInterval.
local function snapshotInterval(snapshotEvery, streamMaxLen, members)
  return min(streamMaxLen, max(snapshotEvery, members))
end

-- rules.ts trimmedBase: history goes in steps of a quarter interval, never past the snapshot.
local function trimmedBase(base, version, sv, interval)
  if version - base <= interval + max(1, floor(interval / 4)) then return base end
  return min(sv, max(base, version - interval))
end

-- The stream list and its snapshot expire after STREAM_IDLE_SECONDS without changes, while the
-- records stay. When either is gone, history restarts at the current version: base and snapshot
-- move to it (a snapshot built from the records, `current` overriding what this script changed
-- and has not written), so a cursor at the current version continues and an older one gets that
-- snapshot. The caller writes the new base and snapshot version ('b', 'sv') to the meta.
local function restartStream(keys, current, idle)
  call('DEL', keys.stream)
  local text = snapshotText(keys.records, current)
  if idle > 0 then call('SET', keys.snapshot, text, 'EX', idle) else call('SET', keys.snapshot, text) end
end

-- The durable tier (server/durable/): every record a user step changes is marked in the dirty
-- sorted set of the user's slot (member 'uid|conv'), in the same step, so a drainer in any process
-- can write it to PostgreSQL and a crash in between loses nothing. `w` (meta) is the user's write
-- clock: raised by every change, never below the wall clock, so a state read later always carries
-- a larger w, also after Redis lost the user. A mark is scored with the w of its record's last
-- change: the record's own version. The drainer clears a mark only if its score is still the one
-- it took; a text compare could not see a record changed and changed back (A-B-A) while another
-- drainer's older read of it was still on its way to PostgreSQL.
--
-- Marks are gathered per set (`pending`: set key -> its ZADD arguments, led by the flag) and
-- written once per set at the end of the call (writePending): on one Redis every user's marks go
-- to one set, and each command a script runs costs ~8k instructions around it, so a group
-- message's members cost one ZADD, not one each.
-- `convs[1..count]` are the user's changed records (the list may hold more past `count`).
local function markDirty(pending, dirtyKey, w, uid, convs, count)
  local args = pending[dirtyKey]
  if not args then
    args = { 'GT' }
    pending[dirtyKey] = args
  end
  local n = #args
  for k = 1, count do
    args[n + 1], args[n + 2] = w, uid .. '|' .. convs[k]
    n = n + 2
  end
end

-- The user's activity (ms), for the cold sweep, gathered with the marks: no flag, a plain ZADD.
local function markActive(pending, activityKey, nowMs, uid)
  local args = pending[activityKey]
  if not args then
    args = { '' }
    pending[activityKey] = args
  end
  args[#args + 1], args[#args + 2] = nowMs, uid
end

-- The badge hook's mark (keys.ts hookDirtyKey): the user's badge may have changed. NX: a mark
-- already there keeps its due time (a user cooling down or waiting for a retry stays so).
local function markBadge(pending, hookKey, nowMs, uid)
  local args = pending[hookKey]
  if not args then
    args = { 'NX' }
    pending[hookKey] = args
  end
  args[#args + 1], args[#args + 2] = nowMs, uid
end

-- The ZADDs markDirty and markActive gathered, in chunks (unpack is bounded by the
-- Lua C stack). A flag '' is none.
local PAIRS_PER_ZADD = 1000
local function writePending(pending)
  for key, args in pairs(pending) do
    local flag = args[1]
    for i = 2, #args, 2 * PAIRS_PER_ZADD do
      local last = min(i + 2 * PAIRS_PER_ZADD - 1, #args)
      if flag == '' then call('ZADD', key, unpack(args, i, last)) else call('ZADD', key, flag, unpack(args, i, last)) end
    end
  end
end

local function nextWrite(w, nowMs)
  return max(w + 1, nowMs)
end

-- Whether the user's last activity (meta 'a', ms) is older than `every` ms: then the activity
-- set of the user's slot is told (the cold sweep reads it), at most once per `every`.
local function touchDue(lastActive, nowMs, every)
  return every > 0 and nowMs - lastActive >= every
end
