-- user_apply.lua: the ops of one or more users; each user's ops atomically and in order (a
-- line-by-line port of rules.ts applyRule/contribution and of MemoryEngine.applyUserOp; the
-- conformance suite keeps them equal). lib/user.lua is prepended, and the `allow-cross-slot-keys`
-- flag: on a Redis Cluster one call carries users of several slots of ONE master.
--
-- Per user, the keys `<prefix>:{u:<uid>}:` + m, c, s, p, L (keys.ts):
--   m  meta hash: e epoch, r run id, v version, b base, n member conversations, sv snapshot
--      version, t total, x mentions, k:<category> per-category totals, ex when the idle expiry
--      was last pushed back
--   c  records hash: conv -> record (server/engine/state-text.ts)
--   s  list: the entries after b (state text, or the bare conv when the user left)
--   p  string: the snapshot at sv
--   L  hash: the read-diffused conversations the user is a member of
-- KEYS[1] the first user's meta key (it routes the call; the others are on the same master)
-- ARGV[1] the Redis run id   ARGV[2] key prefix   ARGV[3] snapshotEvery   ARGV[4] streamMaxLen
-- ARGV[5] mention cap   ARGV[6] idle seconds (0: never)   ARGV[7] PUBLISH, SPUBLISH or '' (none)
-- ARGV[8] arrival time ('' = none)   ARGV[9] now (Unix seconds, for the idle expiry)
-- ARGV[10] 1 on a cluster (check that each user's keys are here before touching them), else 0
-- ARGV[11] 1: reply with each op's result; 0: only each user's epoch (the caller reads no results)
-- ARGV[12..] per user: uid, number of ops, then the ops, each its type, conversation and fields:
--   m (message):    lastSeq, readSeq, mention seqs 'a,b,c'
--   r (read):       seq
--   g (membership): gen, flags <member><large>, joinGen, joinHead, head, category
--   s (settings):   muted 1|0|-, markedUnread 1|0|-, deleteAt (or -)
-- Publishes each user's changes on `<prefix>:bus:{u:<uid>}`, in version order: 'epoch|at', then
-- a line 'v|state' per change.
-- Returns per user: epoch, then (ARGV[11] = 1) per op: changed 1|0, member 1|0, version after it,
-- state text or ''.
-- On a cluster, a user whose keys are not on this master (a slot moved) stops the call before
-- anything of theirs is touched: the reply then ends with the marker 'moved' and the users not
-- applied are left for the caller to send again.

local runId, prefix = ARGV[1], ARGV[2]
local snapshotEvery, streamMaxLen = tonumber(ARGV[3]), tonumber(ARGV[4])
local mentionCap, idle = tonumber(ARGV[5]), tonumber(ARGV[6])
local publishCmd, at, now = ARGV[7], ARGV[8], tonumber(ARGV[9])
local checkLocal = ARGV[10] == '1'
local withResults = ARGV[11] == '1'
local FIELDS = { m = 3, r = 1, g = 6, s = 3 }

local function copy(r)
  local seqs = NO_MENTIONS
  if #r.mentions > 0 then
    seqs = {}
    for i, s in ipairs(r.mentions) do seqs[i] = s end
  end
  return {
    conv = r.conv, member = r.member, muted = r.muted, marked = r.marked, large = r.large, lastSeq = r.lastSeq,
    readSeq = r.readSeq, deletedSeq = r.deletedSeq, gen = r.gen, joinGen = r.joinGen, category = r.category, mentions = seqs,
  }
end

local function blank(conv)
  return {
    conv = conv, member = false, muted = false, marked = false, large = false, lastSeq = 0, readSeq = 0,
    deletedSeq = -1, gen = 0, joinGen = 0, category = 'default', mentions = NO_MENTIONS,
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

local function raiseRead(r, seq)
  if seq <= r.readSeq then return end
  r.readSeq = seq
  r.marked = false
  r.mentions = keepAbove(r.mentions, seq)
end

local function mergeMentions(seqs, added, readSeq)
  -- Most messages mention no one, and `seqs` already holds only seqs above readSeq (raiseRead).
  if added == '' and #seqs <= mentionCap then return seqs end
  local seen, list = {}, {}
  for _, s in ipairs(seqs) do
    if s > readSeq and not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  for text in string.gmatch(added, '%d+') do
    local s = tonumber(text)
    if s > readSeq and not seen[s] then seen[s] = true; list[#list + 1] = s end
  end
  table.sort(list)
  if #list <= mentionCap then return list end
  local out = {}
  for i = #list - mentionCap + 1, #list do out[#out + 1] = list[i] end
  return out
end

local function flag(arg)
  if arg == '1' then return true elseif arg == '0' then return false end
  return nil
end

local function apply(before, op, conv, i)
  -- ARGV[i] is the op type, ARGV[i + 1] its conversation, then its fields.
  if op == 'm' then
    local r = before and copy(before) or blank(conv)
    r.lastSeq = math.max(r.lastSeq, tonumber(ARGV[i + 2]))
    raiseRead(r, tonumber(ARGV[i + 3]))
    r.mentions = mergeMentions(r.mentions, ARGV[i + 4], r.readSeq)
    return r
  elseif op == 'r' then
    if not (before and before.member) then return before end
    local r = copy(before)
    raiseRead(r, tonumber(ARGV[i + 2]))
    return r
  elseif op == 'g' then
    local gen = tonumber(ARGV[i + 2])
    if before and gen < before.gen then return before end
    local r = before and copy(before) or blank(conv)
    r.gen = gen
    local flags = ARGV[i + 3]
    if string.byte(flags, 1) == 49 then
      local joinGen = tonumber(ARGV[i + 4])
      if not r.member or r.joinGen ~= joinGen then
        r.member = true
        r.joinGen = joinGen
        raiseRead(r, tonumber(ARGV[i + 5]))
        r.mentions = keepAbove(r.mentions, r.readSeq)
        r.marked = false
        r.deletedSeq = -1
      end
      r.lastSeq = math.max(r.lastSeq, tonumber(ARGV[i + 6]))
      r.large = string.byte(flags, 2) == 49
      r.category = ARGV[i + 7]
    elseif r.member then
      r.member = false
      r.mentions = NO_MENTIONS
      r.marked = false
    end
    return r
  elseif op == 's' then
    if not (before and before.member) then return before end
    local r = copy(before)
    if ARGV[i + 4] ~= '-' then
      local head = math.max(tonumber(ARGV[i + 4]), r.lastSeq)
      raiseRead(r, head)
      r.deletedSeq = math.max(r.deletedSeq, head)
      r.marked = false
    end
    local muted, marked = flag(ARGV[i + 2]), flag(ARGV[i + 3])
    if muted ~= nil then r.muted = muted end
    if marked ~= nil then r.marked = marked end
    return r
  end
  error('unknown op type ' .. tostring(op))
end

local function sameVisible(a, b)
  local am, bm = a and a.member, b and b.member
  if not am and not bm then return true end
  if not am or not bm then return false end
  return a.lastSeq == b.lastSeq and a.readSeq == b.readSeq and #a.mentions == #b.mentions and a.muted == b.muted
    and a.marked == b.marked and a.category == b.category and a.large == b.large and a.deletedSeq == b.deletedSeq
end

local function sameRecord(a, b)
  if a == b then return true end
  if not a or not b then return false end
  if not sameVisible(a, b) or a.member ~= b.member or a.gen ~= b.gen or a.joinGen ~= b.joinGen
    or a.lastSeq ~= b.lastSeq or a.readSeq ~= b.readSeq or a.muted ~= b.muted or a.marked ~= b.marked
    or a.category ~= b.category or a.large ~= b.large or a.deletedSeq ~= b.deletedSeq or #a.mentions ~= #b.mentions then
    return false
  end
  for i, s in ipairs(a.mentions) do
    if b.mentions[i] ~= s then return false end
  end
  return true
end

-- rules.ts contribution(): unread, mentions, category of what a record adds to the stored totals.
local function contribution(r)
  if not r or not r.member or r.large or r.muted or r.lastSeq <= r.deletedSeq then return 0, 0, nil end
  return math.max(0, r.lastSeq - r.readSeq), #r.mentions, r.category
end

-- One user's ops (ARGV[first..last]); appends this user's results to `out`.
-- The meta fields read up front (META_FIELDS order), the default category's total with them
-- (most changes touch it); the other per-category totals are read when touched.
local META_FIELDS = { 'e', 'r', 'v', 'b', 'n', 'sv', 't', 'x', 'ex', 'k:default' }

local function addCategory(delta, category, amount)
  if category and amount ~= 0 then delta[category] = (delta[category] or 0) + amount end
end

local function applyUser(uid, meta, first, last, out)
  local tag = prefix .. ':{u:' .. uid .. '}:'
  local metaKey, recordsKey = tag .. 'm', tag .. 'c'
  -- The other keys (stream s, snapshot p, large index L) are named where a change needs them:
  -- most calls touch no snapshot, and each name is another string to allocate.
  local exists = meta[1] ~= false
  local epoch = currentEpoch(metaKey, meta[1], meta[2], runId)
  local version = tonumber(meta[3] or '0')
  local base = tonumber(meta[4] or '0')
  local members = tonumber(meta[5] or '0')
  local sv = tonumber(meta[6] or '0')
  local total = tonumber(meta[7] or '0')
  local mentionTotal = tonumber(meta[8] or '0')
  local expiredAt = tonumber(meta[9] or '0')
  local startVersion, startBase, startMembers, startSv = version, base, members, sv
  local startTotal, startMentions = total, mentionTotal

  local current = {} -- conv -> record as of the ops so far (false: none)
  local categoryDelta = {}
  local epochAt = #out + 1
  out[epochAt] = epoch
  local dirty, dirtyOrder = {}, {}
  local entries, lines = {}, {}
  local wasLargeMember = {} -- conv -> whether it was in the large hash before this script

  local i = first
  while i <= last do
    local op, conv = ARGV[i], ARGV[i + 1]
    local width = FIELDS[op]
    if not width then error('unknown op type ' .. tostring(op)) end
    local before = current[conv]
    if before == nil then
      local raw = redis.call('HGET', recordsKey, conv)
      before = raw and decodeRecord(conv, raw) or false
      current[conv] = before
    end
    local after = apply(before or nil, op, conv, i)
    local changed = false
    local shownText
    if after and not sameRecord(before or nil, after) then
      current[conv] = after
      if not dirty[conv] then dirty[conv] = true; dirtyOrder[#dirtyOrder + 1] = conv end
      if not sameVisible(before or nil, after) then
        changed = true
        local oldUnread, oldMentions, oldCategory = contribution(before)
        local newUnread, newMentions, newCategory = contribution(after)
        total = total + newUnread - oldUnread
        mentionTotal = mentionTotal + newMentions - oldMentions
        addCategory(categoryDelta, oldCategory, -oldUnread)
        addCategory(categoryDelta, newCategory, newUnread)
        local wasMember = before and before.member
        if after.member and not wasMember then members = members + 1 elseif wasMember and not after.member then members = members - 1 end
        if wasLargeMember[conv] == nil then wasLargeMember[conv] = (wasMember and before.large) == true end
        version = version + 1
        shownText = after.member and stateText(after) or nil
        local text = shownText or conv
        entries[#entries + 1] = text
        lines[#lines + 1] = int(version) .. '|' .. text
        local interval = snapshotInterval(snapshotEvery, streamMaxLen, members)
        if version - sv >= interval then
          local snap = snapshotText(recordsKey, current)
          if idle > 0 then redis.call('SET', tag .. 'p', snap, 'EX', idle) else redis.call('SET', tag .. 'p', snap) end
          sv = version
        end
        base = trimmedBase(base, version, sv, interval)
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
  if #dirtyOrder > 0 then
    local fields = {}
    for _, conv in ipairs(dirtyOrder) do
      fields[#fields + 1] = conv
      fields[#fields + 1] = encodeRecord(current[conv])
    end
    redis.call('HSET', recordsKey, unpack(fields))
  end
  if version == startVersion then return end
  local streamKey = tag .. 's'

  -- The list held the versions after startBase; a list that holds fewer expired while idle.
  local length = redis.call('RPUSH', streamKey, unpack(entries))
  local fresh = length == #entries
  if length ~= version - startBase then
    -- History restarts at the version just reached (these changes were pushed all the same).
    restartStream({ records = recordsKey, stream = streamKey, snapshot = tag .. 'p' }, current, idle)
    base, sv = version, version
  elseif base > startBase then
    redis.call('LTRIM', streamKey, base - startBase, -1)
  end
  -- Only the meta fields that moved.
  local fields = { 'v', int(version) }
  if base ~= startBase then fields[#fields + 1] = 'b'; fields[#fields + 1] = int(base) end
  if members ~= startMembers then fields[#fields + 1] = 'n'; fields[#fields + 1] = int(members) end
  if sv ~= startSv then fields[#fields + 1] = 'sv'; fields[#fields + 1] = int(sv) end
  if total ~= startTotal then fields[#fields + 1] = 't'; fields[#fields + 1] = int(total) end
  if mentionTotal ~= startMentions then fields[#fields + 1] = 'x'; fields[#fields + 1] = int(mentionTotal) end
  if not exists then
    -- The user's first visible change: its stream (and epoch) begins.
    epoch = newEpoch(metaKey, runId)
    out[epochAt] = epoch
    fields[#fields + 1] = 'e'; fields[#fields + 1] = epoch
    fields[#fields + 1] = 'r'; fields[#fields + 1] = runId
  end
  if idle > 0 then
    -- Pushing the expiry back costs two commands: do it when the list is new, and otherwise
    -- at most every idle/8 seconds (the stream then lives between 7/8 and all of `idle`).
    if fresh then redis.call('EXPIRE', streamKey, idle) end
    if now - expiredAt >= idle / 8 then
      if not fresh then redis.call('EXPIRE', streamKey, idle) end
      redis.call('EXPIRE', tag .. 'p', idle)
      fields[#fields + 1] = 'ex'; fields[#fields + 1] = int(now)
    end
  end
  local gone = {}
  for category, delta in pairs(categoryDelta) do
    if delta ~= 0 then
      local field = 'k:' .. category
      local stored = category == 'default' and meta[10] or redis.call('HGET', metaKey, field)
      local value = tonumber(stored or '0') + delta
      if value == 0 then gone[#gone + 1] = field else fields[#fields + 1] = field; fields[#fields + 1] = int(value) end
    end
  end
  redis.call('HSET', metaKey, unpack(fields))
  if #gone > 0 then redis.call('HDEL', metaKey, unpack(gone)) end
  -- The large hash holds exactly the conversations whose record is a member and large.
  for conv, was in pairs(wasLargeMember) do
    local r = current[conv]
    local is = (r and r.member and r.large) == true
    if is and not was then redis.call('HSET', tag .. 'L', conv, '1') elseif was and not is then redis.call('HDEL', tag .. 'L', conv) end
  end
  if publishCmd ~= '' then
    redis.call(publishCmd, prefix .. ':bus:{u:' .. uid .. '}', epoch .. '|' .. at .. '\n' .. table.concat(lines, '\n'))
  end
end

local out = {}
local i = 12
while i <= #ARGV do
  local uid, count = ARGV[i], tonumber(ARGV[i + 1])
  local first = i + 2
  local last = first - 1
  for _ = 1, count do last = last + 2 + FIELDS[ARGV[last + 1]] end
  local metaKey = prefix .. ':{u:' .. uid .. '}:m'
  local meta
  if checkLocal then
    meta = redis.pcall('HMGET', metaKey, unpack(META_FIELDS))
    if meta.err then
      out[#out + 1] = 'moved'
      return out
    end
  else
    meta = redis.call('HMGET', metaKey, unpack(META_FIELDS))
  end
  applyUser(uid, meta, first, last, out)
  i = last + 1
end
return out
