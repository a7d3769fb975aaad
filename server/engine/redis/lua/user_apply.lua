-- user_apply.lua: one UserOp, atomically (a line-by-line port of rules.ts applyRule/contribution
-- and of MemoryEngine.applyUserOp/maybeSnapshot; the conformance suite keeps them equal).
--
-- KEYS[1] meta   hash: epoch, rid (Redis run id), version, base, members (conversations the user is a member of)
-- KEYS[2] c      hash: conv -> cmsgpack record (the StoredConv of rules.ts)
-- KEYS[3] tot    hash: total, mentions, cat:<category>
-- KEYS[4] s      stream: <v>-0 entry {c=conv, s=packed ConvState or ''}, <v>-1 snapshot {snap=packed ConvState[]}
-- KEYS[5] snaps  list of snapshot versions, ascending
-- KEYS[6] large  set of read-diffused conversations the user is a member of
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
--         (KEYS[1], ARGV[1] and ARGV[2] go to userMeta of lib/epoch.lua, prepended when loading)
-- ARGV[3] snapshotEvery   ARGV[4] streamMaxLen   ARGV[5] mention cap (LIMITS.mentionSeqsPerConversation)
-- ARGV[6] op type         ARGV[7] conv           ARGV[8..] op arguments:
--   message: lastSeq, readSeq, mentionSeq...   read: seq   join: head, category, large(1|0)
--   leave: -   delete: head   settings: muted(1|0|-), markedUnread(1|0|-)   mode: large(1|0), head
--   category: category
-- Returns {changed 1|0, member 1|0, epoch, version, packed ConvState or '' when not a member}

-- Lua numbers are doubles and tostring() keeps only 14 digits: format integers explicitly.
local function int(n) return string.format('%d', n) end

-- The epoch (lib/epoch.lua, prepended) and every other meta field the script may need, in one read.
local epoch, version, members, oldBase = userMeta(KEYS[1], ARGV[1], ARGV[2], 'members', 'base')
members = tonumber(members or '0')
oldBase = tonumber(oldBase or '0')

local snapshotEvery = tonumber(ARGV[3])
local streamMaxLen = tonumber(ARGV[4])
local mentionCap = tonumber(ARGV[5])
local op = ARGV[6]
local conv = ARGV[7]

local raw = redis.call('HGET', KEYS[2], conv)
local before = nil
if raw then before = cmsgpack.unpack(raw) end

local function toState(rec)
  return {
    conv = rec.conv, lastSeq = rec.lastSeq, readSeq = rec.readSeq, mentions = #rec.mentionSeqs,
    muted = rec.muted, markedUnread = rec.markedUnread, category = rec.category, large = rec.large,
    deletedSeq = rec.deletedSeq,
  }
end

local function copy(rec)
  local out = {}
  for k, v in pairs(rec) do out[k] = v end
  local seqs = {}
  for i, seq in ipairs(rec.mentionSeqs) do seqs[i] = seq end
  out.mentionSeqs = seqs
  return out
end

local function mergeMentions(current, added, readSeq)
  local seen, list = {}, {}
  for _, src in ipairs({ current, added }) do
    for _, seq in ipairs(src) do
      if seq > readSeq and not seen[seq] then
        seen[seq] = true
        list[#list + 1] = seq
      end
    end
  end
  table.sort(list)
  if #list <= mentionCap then return list end
  local out = {}
  for i = #list - mentionCap + 1, #list do out[#out + 1] = list[i] end
  return out
end

local function raiseRead(rec, seq)
  if seq <= rec.readSeq then return end
  rec.readSeq = seq
  rec.markedUnread = false
  local kept = {}
  for _, m in ipairs(rec.mentionSeqs) do
    if m > seq then kept[#kept + 1] = m end
  end
  rec.mentionSeqs = kept
end

local function flag(arg)
  if arg == '1' then return true elseif arg == '0' then return false end
  return nil
end

-- applyRule
local after
if op == 'join' then
  if before and before.member then
    after = before
  else
    local head = tonumber(ARGV[8])
    local muted = false
    if before then muted = before.muted end
    after = {
      conv = conv, member = true,
      lastSeq = math.max(before and before.lastSeq or 0, head),
      readSeq = math.max(before and before.readSeq or 0, head),
      mentionSeqs = {}, muted = muted, markedUnread = false,
      category = ARGV[9], large = ARGV[10] == '1', deletedSeq = -1,
    }
  end
elseif not (before and before.member) then
  after = before
else
  after = copy(before)
  if op == 'message' then
    after.lastSeq = math.max(after.lastSeq, tonumber(ARGV[8]))
    raiseRead(after, tonumber(ARGV[9]))
    local added = {}
    for i = 10, #ARGV do added[#added + 1] = tonumber(ARGV[i]) end
    after.mentionSeqs = mergeMentions(after.mentionSeqs, added, after.readSeq)
  elseif op == 'read' then
    raiseRead(after, tonumber(ARGV[8]))
  elseif op == 'leave' then
    after.member = false
    after.mentionSeqs = {}
    after.markedUnread = false
  elseif op == 'delete' then
    local head = math.max(tonumber(ARGV[8]), after.lastSeq)
    raiseRead(after, head)
    after.deletedSeq = math.max(after.deletedSeq, head)
    after.markedUnread = false
  elseif op == 'settings' then
    local muted, marked = flag(ARGV[8]), flag(ARGV[9])
    if muted ~= nil then after.muted = muted end
    if marked ~= nil then after.markedUnread = marked end
  elseif op == 'mode' then
    after.large = ARGV[8] == '1'
    after.lastSeq = math.max(after.lastSeq, tonumber(ARGV[9]))
  elseif op == 'category' then
    after.category = ARGV[8]
  else
    return redis.error_reply('unknown op type ' .. tostring(op))
  end
end

local function sameRecord(a, b)
  if a == b then return true end
  if not a or not b then return false end
  if a.member ~= b.member or a.lastSeq ~= b.lastSeq or a.readSeq ~= b.readSeq or a.muted ~= b.muted
    or a.markedUnread ~= b.markedUnread or a.category ~= b.category or a.large ~= b.large
    or a.deletedSeq ~= b.deletedSeq or #a.mentionSeqs ~= #b.mentionSeqs then
    return false
  end
  for i, seq in ipairs(a.mentionSeqs) do
    if b.mentionSeqs[i] ~= seq then return false end
  end
  return true
end

local isMember = after ~= nil and after.member == true
local packedState = ''
if isMember then packedState = cmsgpack.pack(toState(after)) end
if after == nil or sameRecord(before, after) then
  return { 0, isMember and 1 or 0, epoch, version, packedState }
end

-- Only what changed is written (a message to a write-diffused group runs this once per member).
-- Totals: rules.ts contribution() of the record before and after, applied as one net delta per
-- field; a zero delta writes nothing, and a category field that reaches 0 is removed.
local function contribution(rec)
  if not rec or not rec.member or rec.large or rec.muted or rec.lastSeq <= rec.deletedSeq then return 0, 0, nil end
  return math.max(0, rec.lastSeq - rec.readSeq), #rec.mentionSeqs, rec.category
end
local function hincr(field, delta)
  if delta ~= 0 then return tonumber(redis.call('HINCRBY', KEYS[3], field, int(delta))) end
end
local function incrCategory(category, delta)
  if hincr('cat:' .. category, delta) == 0 then redis.call('HDEL', KEYS[3], 'cat:' .. category) end
end
local oldUnread, oldMentions, oldCategory = contribution(before)
local newUnread, newMentions, newCategory = contribution(after)
hincr('total', newUnread - oldUnread)
hincr('mentions', newMentions - oldMentions)
if oldCategory == newCategory then
  if newCategory then incrCategory(newCategory, newUnread - oldUnread) end
else
  if oldCategory then incrCategory(oldCategory, -oldUnread) end
  if newCategory then incrCategory(newCategory, newUnread) end
end

redis.call('HSET', KEYS[2], conv, cmsgpack.pack(after))
-- The large set holds exactly the conversations whose record is a member and large.
local wasLarge = before ~= nil and before.member == true and before.large == true
local isLarge = after.member == true and after.large == true
if isLarge and not wasLarge then
  redis.call('SADD', KEYS[6], conv)
elseif wasLarge and not isLarge then
  redis.call('SREM', KEYS[6], conv)
end
version = version + 1
local memberDelta = (after.member and 1 or 0) - ((before and before.member) and 1 or 0)
if memberDelta == 0 then
  redis.call('HSET', KEYS[1], 'version', int(version))
else
  members = members + memberDelta
  redis.call('HSET', KEYS[1], 'version', int(version), 'members', int(members))
end
redis.call('XADD', KEYS[4], int(version) .. '-0', 'c', conv, 's', packedState)

-- maybeSnapshot
local lastSnapshot = tonumber(redis.call('LINDEX', KEYS[5], -1) or '0')
if version - lastSnapshot >= math.max(snapshotEvery, members) then
  local convs = {}
  for _, packed in ipairs(redis.call('HVALS', KEYS[2])) do
    local rec = cmsgpack.unpack(packed)
    if rec.member then convs[#convs + 1] = toState(rec) end
  end
  redis.call('XADD', KEYS[4], int(version) .. '-1', 'snap', cmsgpack.pack(convs))
  redis.call('RPUSH', KEYS[5], int(version))
  -- History is kept back to `base` (a snapshot boundary, or 0). Advance base to the newest
  -- snapshot that still leaves streamMaxLen entries after it; never trim anywhere else.
  local base = oldBase
  local snaps = redis.call('LRANGE', KEYS[5], 0, -1)
  for _, v in ipairs(snaps) do
    local snapV = tonumber(v)
    if snapV > base and version - snapV >= streamMaxLen then base = snapV end
  end
  if base > oldBase then
    redis.call('HSET', KEYS[1], 'base', int(base))
    -- MINID <base>-1 keeps the snapshot at base and drops the entry <base>-0 and everything older.
    redis.call('XTRIM', KEYS[4], 'MINID', int(base) .. '-1')
    local drop = 0
    for _, v in ipairs(snaps) do
      if tonumber(v) < base then drop = drop + 1 end
    end
    if drop > 0 then redis.call('LTRIM', KEYS[5], drop, -1) end
  end
end

return { 1, isMember and 1 or 0, epoch, version, packedState }
