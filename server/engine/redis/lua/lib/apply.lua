-- lib/apply.lua: the user step, user_apply.lua's work (and ingest_flush.lua's user steps), made
-- once when the library loads (scripts.ts puts it after lib/user.lua and lib/rebuild.lua);
-- user_apply.lua's header says what the keys and arguments hold.

-- The call's arguments and settings (user_apply.lua's ARGV), set by applyUsers at the start of
-- each call: the functions below are made once, when the library loads, not at every call (a
-- call's setup, its closures, tables and arguments, measured 43k instructions when it was made
-- per call, 19.5k since: with one message per flush it is paid per message).
local argv, runId, prefix, snapshotEvery, streamMaxLen, mentionCap, idle, publishCmd, at, now
local checkLocal, withResults, durableNow, activityEvery, hookNow
local FIELDS = { m = 4, M = 5, n = 6, r = 2, g = 7, G = 8, s = 3, U = 4 }

local function blank(conv)
  return {
    conv = conv, member = false, muted = false, marked = false, large = false, lastSeq = 0, readSeq = 0,
    deletedSeq = -1, gen = '0', joinGen = '0', category = 'default', mentions = NO_MENTIONS, readGen = 0,
    readMentions = NO_MENTIONS, text = false, dirty = false,
  }
end

local function keepAbove(seqs, readSeq)
  if #seqs == 0 then return seqs end
  local kept = {}
  for _, m in ipairs(seqs) do
    if m > readSeq then kept[#kept + 1] = m end
  end
  return kept
end

-- The newest `cap` (default: the call's `mentionCap`) of an ascending list.
local function newest(seqs, cap)
  cap = cap or mentionCap
  if #seqs <= cap then return seqs end
  local out = {}
  for i = #seqs - cap + 1, #seqs do out[#out + 1] = seqs[i] end
  return out
end

-- rules.ts raiseRead: the mentions a read spends move to readMentions.
local function raiseRead(r, seq)
  if seq <= r.readSeq then return end
  r.readSeq = seq
  r.marked = false
  if #r.mentions == 0 then return end
  local kept, spent = {}, nil
  for _, m in ipairs(r.mentions) do
    if m > seq then kept[#kept + 1] = m else spent = spent or {}; spent[#spent + 1] = m end
  end
  if not spent then return end
  r.mentions = kept
  local all = {}
  for _, m in ipairs(r.readMentions) do all[#all + 1] = m end
  for _, m in ipairs(spent) do all[#all + 1] = m end
  r.readMentions = newest(all)
end

-- rules.ts setRead: the read register set to (gen, seq), never below deletedSeq nor 0.
local function setRead(r, gen, seq)
  local target = max(seq, r.deletedSeq, 0)
  local all = {}
  for _, m in ipairs(r.readMentions) do all[#all + 1] = m end
  for _, m in ipairs(r.mentions) do all[#all + 1] = m end
  local above, spent = {}, {}
  for _, m in ipairs(all) do
    if m > target then above[#above + 1] = m else spent[#spent + 1] = m end
  end
  r.readGen, r.readSeq, r.marked = gen, target, false
  r.mentions, r.readMentions = above, newest(spent)
end

-- rules.ts mergeRead: lexicographic on (readGen, readSeq); gen nil: the record's generation.
local function mergeRead(r, gen, seq)
  if gen == nil or gen == r.readGen then raiseRead(r, seq) elseif gen > r.readGen then setRead(r, gen, seq) end
end

local function mergeMentions(seqs, added, readSeq)
  -- Most messages mention no one, and `seqs` already holds only seqs above readSeq (raiseRead).
  if added == '' and #seqs <= mentionCap then return seqs end
  local seen, list = {}, {}
  for _, s in ipairs(seqs) do
    if s > readSeq and not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  for text in gmatch(added, '%d+') do
    local s = tonumber(text)
    if s > readSeq and not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  table.sort(list)
  if #list <= mentionCap then return list end
  local out = {}
  for i = #list - mentionCap + 1, #list do out[#out + 1] = list[i] end
  return out
end

-- rules.ts mergeNocount: the record's non-counting seqs (nil: none) with `added` ('a,b'):
-- distinct, ascending, the newest NOCOUNT_CAP.
local function mergeNocount(seqs, added)
  local seen, list = {}, {}
  for _, s in ipairs(seqs or NO_MENTIONS) do
    if not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  for text in gmatch(added, '%d+') do
    local s = tonumber(text)
    if not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  table.sort(list)
  if #list <= NOCOUNT_CAP then return list end
  local out = {}
  for i = #list - NOCOUNT_CAP + 1, #list do out[#out + 1] = list[i] end
  return out
end

-- The seqs of `seqs` not in the set `gone` (a new list).
local function without(seqs, gone)
  if #seqs == 0 then return seqs end
  local kept = {}
  for _, s in ipairs(seqs) do
    if not gone[s] then kept[#kept + 1] = s end
  end
  return kept
end

-- The seqs of `seqs` (nil: none) for which keep(s) holds; nil when none is left.
local function nocountWhere(seqs, keep)
  if not seqs then return nil end
  local kept = {}
  for _, s in ipairs(seqs) do
    if keep(s) then kept[#kept + 1] = s end
  end
  if #kept == 0 then return nil end
  return kept
end

-- rules.ts addNocount's second half: the mentions of the record's non-counting seqs go, spent
-- ones too. Returns the set of those seqs.
local function dropGone(r)
  local gone = {}
  for _, s in ipairs(r.nocount) do gone[s] = true end
  r.mentions = without(r.mentions, gone)
  r.readMentions = without(r.readMentions, gone)
  return gone
end

local function flag(arg)
  if arg == '1' then return true elseif arg == '0' then return false end
  return nil
end

-- The op at argv[i] (its type, conversation, then its fields) on `r`, the conversation's record
-- (nil: none stored), changed in place (records are this script's own tables; mention lists are
-- never changed in place, only replaced). Returns the record after the op (nil: still none).
local function apply(r, op, conv, i)
  if op == 'm' or op == 'M' or op == 'n' then
    -- rules.ts: made before this membership began (a rejoin or a rebase since): ignored. Both
    -- are canonical '%d' texts, most often the same (a membership unchanged since the join):
    -- compared as texts first, read as numbers (two strtod calls) only when they differ.
    local opGen, joinGen = argv[i + 5], r and r.joinGen
    if r and r.member and opGen ~= '' and opGen ~= joinGen and tonumber(opGen) < tonumber(joinGen) then return r end
    r = r or blank(conv)
    local lastSeq = num(argv[i + 2])
    if lastSeq > r.lastSeq then r.lastSeq = lastSeq end
    raiseRead(r, num(argv[i + 3]))
    local added = argv[i + 4]
    if op == 'n' then
      -- rules.ts: non-counting seqs (issue 43) join the record's set; their mentions go, spent
      -- ones too, and none of them is added.
      r.nocount = mergeNocount(r.nocount, argv[i + 7])
    end
    if r.nocount then
      local gone = dropGone(r)
      if added ~= '' then
        local kept = {}
        for text in gmatch(added, '%d+') do
          if not gone[tonumber(text)] then kept[#kept + 1] = text end
        end
        added = concat(kept, ',')
      end
    end
    r.mentions = mergeMentions(r.mentions, added, r.readSeq)
    -- rules.ts: the last activity is a max-register; only 'M' carries one (most messages have
    -- none, and an argument more per op was a cost every message paid).
    if op == 'M' or (op == 'n' and argv[i + 6] ~= '') then
      local opAt = argv[i + 6] + 0
      if opAt > (r.at or 0) then r.at = opAt end
    end
  elseif op == 'r' then
    local gen = argv[i + 3]
    if r and r.member then mergeRead(r, gen ~= '' and num(gen) or nil, num(argv[i + 2])) end
  elseif op == 'U' then
    -- rules.ts 'unread-from': made in another membership (joinGen, a canonical text like the
    -- record's): nothing; without a generation, the record's next one; floored at `floor`.
    local gen, floorText, opJoinGen = argv[i + 3], argv[i + 4], argv[i + 5]
    if not (r and r.member) or (opJoinGen ~= '' and opJoinGen ~= r.joinGen) then return r end
    local seq = num(argv[i + 2]) - 1
    if floorText ~= '' then seq = max(seq, num(floorText)) end
    mergeRead(r, gen ~= '' and num(gen) or r.readGen + 1, seq)
  elseif op == 'g' or op == 'G' then
    local gen = tonumber(argv[i + 2])
    if r and gen < tonumber(r.gen) then return r end
    r = r or blank(conv)
    r.gen = int(gen)
    local flags = argv[i + 3]
    if byte(flags, 1) == 49 then
      local joinGen = int(tonumber(argv[i + 4]))
      if not r.member or r.joinGen ~= joinGen then
        local rebase = byte(flags, 3) == 49
        if not r.member or not rebase then
          r.member = true
          raiseRead(r, tonumber(argv[i + 5]))
          r.mentions = keepAbove(r.mentions, r.readSeq)
          r.readMentions = NO_MENTIONS
          r.marked = false
          r.deletedSeq = -1
        end
        r.joinGen = joinGen
        if rebase then
          -- rules.ts lowerTo: the operator lowered the head; lastSeq is set to it.
          local head = tonumber(argv[i + 6])
          r.lastSeq = head
          r.readSeq = min(r.readSeq, head)
          r.deletedSeq = min(r.deletedSeq, head)
          local kept = {}
          for _, m in ipairs(r.mentions) do
            if m > r.readSeq and m <= head then kept[#kept + 1] = m end
          end
          r.mentions = kept
          local spent = {}
          for _, m in ipairs(r.readMentions) do
            if m <= head then spent[#spent + 1] = m end
          end
          r.readMentions = spent
          -- Seqs above the lowered head will be other messages.
          r.nocount = nocountWhere(r.nocount, function(s) return s <= head end)
        end
      end
      r.lastSeq = max(r.lastSeq, tonumber(argv[i + 6]))
      local convAt = argv[i + 8]
      if convAt ~= '' then
        convAt = convAt + 0
        if convAt > (r.at or 0) then r.at = convAt end
      end
      -- rules.ts: a rewrite to write diffusion brings the conversation's non-counting seqs.
      if op == 'G' then
        r.nocount = mergeNocount(r.nocount, argv[i + 9])
        dropGone(r)
      end
      r.large = byte(flags, 2) == 49
      r.category = argv[i + 7]
    elseif r.member then
      r.member = false
      r.mentions = NO_MENTIONS
      r.readMentions = NO_MENTIONS
      r.nocount = nil
      r.marked = false
    end
  elseif op == 's' then
    if not (r and r.member) then return r end
    if argv[i + 4] ~= '-' then
      local head = max(tonumber(argv[i + 4]), r.lastSeq)
      raiseRead(r, head)
      r.deletedSeq = max(r.deletedSeq, head)
      r.marked = false
      r.readMentions = NO_MENTIONS
      local deleted = r.deletedSeq
      r.nocount = nocountWhere(r.nocount, function(s) return s > deleted end)
    end
    -- The level (rules.ts): '0' all, '1' none (muted), '2' mentions only, '-' unchanged.
    local level, marked = argv[i + 2], flag(argv[i + 3])
    if level ~= '-' then r.muted, r.mentionsOnly = level == '1', level == '2' or nil end
    if marked ~= nil then r.marked = marked end
  else
    error('unknown op type ' .. tostring(op))
  end
  return r
end

-- contribution(): lib/user.lua's.

-- One user's ops (argv[first..last]); appends this user's results to `out`.
-- The meta is read up front: its epoch, run id and packed counters (lib/user.lua counters), the
-- default category's total among them (most changes touch it); the other per-category totals
-- are read when touched. Each field an HMGET names costs ~2k instructions (its argument, lookup
-- and reply), the command itself ~7k: the counters' 10 fields were 30k of an op's ~190k.

-- Per-category deltas of the stored totals: the default category's in a number, the others in a
-- table made only when one is touched (most users have only the default category).
local defaultDelta, otherDeltas
-- set key -> ZADD arguments of this call (markDirty); made by applyUsers
local marks

local function addCategory(category, amount)
  if not category or amount == 0 then return end
  if category == 'default' then
    defaultDelta = defaultDelta + amount
  else
    otherDeltas = otherDeltas or {}
    otherDeltas[category] = (otherDeltas[category] or 0) + amount
  end
end

-- Per user, the convs whose record changed (in order of first change), the stream entries and
-- the notification lines: lists of the CALL, reused by each of its users (applyUser counts what
-- it put in them; what a user before left past that count is never read). A table made per
-- user and list was ~2k instructions each (the table, its array part, their frees, the
-- collector's sweep), and a group message makes three per member (bench/reports/redis-cost.md,
-- "the symbol build's profile").
local changedConvs, streamEntries, noticeLines, recordFields

-- Appends `v` to the list `t`, made on first use with a constructor: Lua 5.1 rehashes an empty
-- table on its first insert, and most users' lists here hold one element.
local function push(t, v)
  if not t then return { v } end
  t[#t + 1] = v
  return t
end

local function applyUser(uid, tag, metaKey, meta, first, last, out, shard)
  local recordsKey = tag .. USER_RECORDS
  -- The other keys (stream s, snapshot p, large index L) are named where a change needs them:
  -- most calls touch no snapshot, and each name is another string to allocate.
  local exists = meta[1] ~= false
  local epoch = currentEpoch(metaKey, meta[1], meta[2], runId)
  local version, base, members, sv, expiredAt, total, mentionTotal, defaultTotal, w, lastActive, legacy =
    counters(metaKey, meta[3])
  local startVersion, startBase = version, base

  -- conv -> record as of the ops so far (false: none); made with its first key, as a constructor
  -- sizes it (an empty table is rehashed at its first insert).
  local current
  defaultDelta, otherDeltas = 0, nil
  local epochAt = #out + 1
  out[epochAt] = epoch
  local changedCount, entryCount = 0, 0 -- in changedConvs, and in streamEntries and noticeLines
  local wasLargeMember -- conv -> whether it was in the large hash before this script

  local i = first
  while i <= last do
    local op, conv = argv[i], argv[i + 1]
    local width = FIELDS[op]
    if not width then error('unknown op type ' .. tostring(op)) end
    local r = current and current[conv]
    if r == nil then
      local raw = call('HGET', recordsKey, conv)
      r = raw and decodeRecord(conv, raw) or false
      if current then current[conv] = r else current = { [conv] = r } end
    end
    local textBefore = r and r.text
    -- What the record shows before the op (the op changes it in place).
    local wasMember = r and r.member or false
    local wasLarge = wasMember and r.large
    local oldUnread, oldMentions, oldCategory = contribution(r or nil)
    local bLast, bRead, bMentions, bMuted, bMarked, bCategory, bDeleted, bReadGen, bOnly, bAt
    -- Issue 43: what the state shows of the non-counting seqs (0 for most records: no list).
    local bNocount = wasMember and r.nocount and nocountAbove(r) or 0
    if wasMember then
      bLast, bRead, bMentions, bMuted, bMarked = r.lastSeq, r.readSeq, #r.mentions, r.muted, r.marked
      bCategory, bDeleted, bReadGen, bOnly, bAt = r.category, r.deletedSeq, r.readGen, r.mentionsOnly, r.at
    end
    local after = apply(r or nil, op, conv, i)
    local changed = false
    local shownText
    if after then
      local text, lsText, rsText, dsText = encodeRecord(after)
      -- The text holds every field of the record: equal texts, equal records.
      if text ~= textBefore then
        if not after.dirty then
          after.dirty = true
          changedCount = changedCount + 1
          changedConvs[changedCount] = conv
        end
        current[conv] = after
        after.text = text
        local isMember = after.member
        if wasMember ~= isMember or (isMember and (after.lastSeq ~= bLast or after.readSeq ~= bRead
          or #after.mentions ~= bMentions or after.muted ~= bMuted or after.marked ~= bMarked
          or after.category ~= bCategory or after.large ~= wasLarge or after.deletedSeq ~= bDeleted
          or after.readGen ~= bReadGen or after.mentionsOnly ~= bOnly or after.at ~= bAt
          or (after.nocount and nocountAbove(after) or 0) ~= bNocount)) then
          changed = true
          local newUnread, newMentions, newCategory = contribution(after)
          total = total + newUnread - oldUnread
          mentionTotal = mentionTotal + newMentions - oldMentions
          addCategory(oldCategory, -oldUnread)
          addCategory(newCategory, newUnread)
          if isMember and not wasMember then members = members + 1 elseif wasMember and not isMember then members = members - 1 end
          if (wasLarge or (isMember and after.large)) and not (wasLargeMember and wasLargeMember[conv] ~= nil) then
            wasLargeMember = wasLargeMember or {}
            wasLargeMember[conv] = wasLarge == true
          end
          version = version + 1
          shownText = isMember and stateTextOf(after, lsText, rsText, dsText) or nil
          local entry = shownText or conv
          entryCount = entryCount + 1
          streamEntries[entryCount] = entry
          noticeLines[entryCount] = int(version) .. '|' .. entry
          local interval = snapshotInterval(snapshotEvery, streamMaxLen, members)
          if version - sv >= interval then
            local snap = snapshotText(recordsKey, current)
            if idle > 0 then call('SET', tag .. USER_SNAPSHOT, snap, 'EX', idle) else call('SET', tag .. USER_SNAPSHOT, snap) end
            sv = version
          end
          base = trimmedBase(base, version, sv, interval)
        end
      end
    end
    if withResults then
      local shown = after and after.member
      out[#out + 1] = changed and 1 or 0
      out[#out + 1] = shown and 1 or 0
      out[#out + 1] = version
      out[#out + 1] = shown and (shownText or stateText(after)) or ''
    end
    i = i + 2 + width
  end

  -- Only what changed is written.
  -- One record (most users of a message) without unpack's call and the field list.
  if changedCount == 1 then
    local conv = changedConvs[1]
    call('HSET', recordsKey, conv, current[conv].text)
  elseif changedCount > 1 then
    for k = 1, changedCount do
      local conv = changedConvs[k]
      recordFields[2 * k - 1] = conv
      recordFields[2 * k] = current[conv].text
    end
    call('HSET', recordsKey, unpack(recordFields, 1, 2 * changedCount))
  end
  local clockMoved = false
  if durableNow then
    if changedCount > 0 then
      w = nextWrite(w, durableNow)
      clockMoved = true
      markDirty(marks, dirtyUsersKeyOf(prefix, shard), int(w), uid, changedConvs, changedCount)
    end
    if (exists or version ~= startVersion) and touchDue(lastActive, durableNow, activityEvery) then
      markActive(marks, activityKeyOf(prefix, shard), durableNow, uid)
      lastActive = durableNow
      clockMoved = true
    end
  end
  -- The badge hook (off: hookNow nil, one test): any visible change may move the badge.
  if hookNow and version ~= startVersion then markBadge(marks, hookDirtyKeyOf(prefix, shard), hookNow, uid) end
  if version == startVersion then
    -- Nothing visible changed (the counters but the clocks are as read).
    if clockMoved then writeCounters(metaKey, legacy, version, base, members, sv, expiredAt, total, mentionTotal, defaultTotal, w, lastActive) end
    return
  end
  local streamKey = tag .. USER_STREAM

  -- The list held the versions after startBase; a list that holds fewer expired while idle.
  local length
  if entryCount == 1 then length = call('RPUSH', streamKey, streamEntries[1]) else length = call('RPUSH', streamKey, unpack(streamEntries, 1, entryCount)) end
  local fresh = length == entryCount
  if length ~= version - startBase then
    -- History restarts at the version just reached (these changes were pushed all the same).
    restartStream({ records = recordsKey, stream = streamKey, snapshot = tag .. USER_SNAPSHOT }, current, idle)
    base, sv = version, version
  elseif base > startBase then
    call('LTRIM', streamKey, base - startBase, -1)
  end
  -- Besides the counters, the meta's text fields that moved: the epoch of a user's first visible
  -- change, the totals of categories other than the default.
  local fields, gone
  if not exists then
    -- The user's first visible change: its stream (and epoch) begins.
    epoch = newEpoch(metaKey, runId)
    out[epochAt] = epoch
    fields = { 'e', epoch, 'r', runId }
  end
  if idle > 0 then
    -- Pushing the expiry back costs two commands: do it when the list is new, and otherwise
    -- at most every idle/8 seconds (the stream then lives between 7/8 and all of `idle`).
    if fresh then call('EXPIRE', streamKey, idle) end
    if now - expiredAt >= idle / 8 then
      if not fresh then call('EXPIRE', streamKey, idle) end
      call('EXPIRE', tag .. USER_SNAPSHOT, idle)
      expiredAt = now
    end
  end
  defaultTotal = defaultTotal + defaultDelta
  if otherDeltas then
    for category, delta in pairs(otherDeltas) do
      if delta ~= 0 then
        local field = 'k:' .. category
        local value = num(call('HGET', metaKey, field)) + delta
        if value == 0 then
          gone = push(gone, field)
        else
          fields = push(fields, field)
          fields[#fields + 1] = int(value)
        end
      end
    end
  end
  if fields then
    writeCounters(metaKey, legacy, version, base, members, sv, expiredAt, total, mentionTotal, defaultTotal, w, lastActive, unpack(fields))
  else
    writeCounters(metaKey, legacy, version, base, members, sv, expiredAt, total, mentionTotal, defaultTotal, w, lastActive)
  end
  if gone then call('HDEL', metaKey, unpack(gone)) end
  -- The large hash holds exactly the conversations whose record is a member and large.
  if wasLargeMember then
    for conv, was in pairs(wasLargeMember) do
      local r = current[conv]
      local is = (r and r.member and r.large) == true
      if is and not was then call('HSET', tag .. USER_LARGE, conv, '1') elseif was and not is then call('HDEL', tag .. USER_LARGE, conv) end
    end
  end
  if publishCmd ~= '' then
    local body = entryCount == 1 and noticeLines[1] or concat(noticeLines, '\n', 1, entryCount)
    call(publishCmd, userChannelOf(prefix, uid), epoch .. '|' .. at .. '\n' .. body)
  end
end

local results -- the call's reply, built by applyAll
local function applyAll()
  local i = 15
  while i <= #argv do
    local uid, count, shard, check = argv[i], num(argv[i + 1]), argv[i + 2], argv[i + 3]
    local first = i + 4
    local last = first - 1
    for _ = 1, count do last = last + 2 + FIELDS[argv[last + 1]] end
    local tag = userKeyTag(prefix, uid)
    local metaKey = tag .. USER_META
    local meta
    if checkLocal then
      meta = rpcall('HMGET', metaKey, 'e', 'r', META_PACKED)
      if meta.err then
        results[#results + 1] = 'moved'
        return
      end
    else
      meta = call('HMGET', metaKey, 'e', 'r', META_PACKED)
    end
    if check == '1' and meta[1] == false then
      results[#results + 1] = 'absent'
    else
      applyUser(uid, tag, metaKey, meta, first, last, results, shard)
    end
    i = last + 1
  end
end

-- user_apply.lua's call: its ARGV (the header there says what each holds); returns its reply.
local function applyUsers(args)
  argv, runId, prefix = args, args[1], args[2]
  snapshotEvery, streamMaxLen = setting(args[3]), setting(args[4])
  mentionCap, idle = setting(args[5]), setting(args[6])
  publishCmd, at, now = args[7], args[8], num(args[9])
  checkLocal = args[10] == '1'
  withResults = args[11] == '1'
  durableNow = args[12] ~= '' and num(args[12]) or nil
  activityEvery = setting(args[13])
  hookNow = args[14] ~= '' and num(args[14]) or nil
  results = {}
  -- The durable tier's marks and activity touches of every user of the call (markDirty), written
  -- once per set after the last user, also when a user's ops raise an error: what was applied
  -- before it stays applied (a script is not rolled back), and so must be marked.
  marks = {}
  changedConvs, streamEntries, noticeLines, recordFields = {}, {}, {}, {}
  local ok, err = pcall(applyAll)
  writePending(marks)
  -- Nothing of this call stays referenced from the library once it returns.
  local reply = results
  argv, results, marks = nil, nil, nil
  changedConvs, streamEntries, noticeLines, recordFields = nil, nil, nil, nil
  if not ok then error(err, 0) end
  return reply
end
