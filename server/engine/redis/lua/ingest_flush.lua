-- ingest_flush.lua: a whole ingest flush on ONE Redis in one call: the conversation step of every
-- conversation (conv_record.lua, unchanged), then the message ops it implies (a port of
-- ingest.ts mergeOps, each op carrying its conversation's generation), then every user step (user_apply.lua, unchanged), each user's ops
-- atomically and in order. One call instead of two saves a round trip, a reply to decode and
-- the ops' arguments; the semantics are the two steps' (nothing runs between them, which the
-- rules allow and no longer need). Not for a cluster: there a user's keys may live on another
-- master (redis-engine.ts runs the two steps there).
--
-- KEYS[1] the first conversation's hash (conv_record.lua)
-- ARGV[1] key prefix   ARGV[2] arrival time ('' = none)   ARGV[3] PUBLISH, SPUBLISH or ''
-- ARGV[4] durable tier: now in ms ('' = off)   ARGV[5] the Redis run id   ARGV[6] snapshotEvery
-- ARGV[7] streamMaxLen   ARGV[8] mention cap   ARGV[9] idle seconds   ARGV[10] now (Unix s)
-- ARGV[11] activity interval in ms   ARGV[12] 1: a user without meta is reported absent and left
--          (durable tier: the caller restores them), else 0
-- ARGV[13] the most user ops one call applies: a flush implying more applies none of them (the
--          caller runs the user steps in chunks, so no script holds Redis for long)
-- ARGV[14] badge hook: now in ms ('' = off; user_apply.lua's ARGV[14])
-- ARGV[15..] per conversation: conv, seq (the newest of the flush), number of candidates (with a
--          '+' after it: then the last activity `at`, ms, '' = none, which every op of the
--          conversation carries, and its @all seqs 'a,b', '' = none, which a write-diffused
--          conversation's members each get as mentions, follow; most flushes carry neither), then
--          per candidate (senders, mentioned users, distinct): uid, lastSeq (0: not a sender or
--          mentioned), readSeq (its own message's seq when a sender, else 0), mention seqs 'a,b'
-- Returns one flat array: 1 | 0 (0: the user ops were too many and none was applied), the number
--          of user ops, the number of absent users (ARGV[12]), then per conversation five values,
--          conv_record.lua's {maxSeq, large, category, gen, member count} (five false: no such
--          conversation), then the absent users' uids; and only when the caller must derive the
--          user ops itself (none applied, or users absent), per conversation its listed uids
--          (conv_record.lua's sixth value; {} when it does not exist), then per conversation its
--          `ahead` (conv_record.lua's eighth value: the members whose mentions of seqs recalled
--          already go, {uid, 'a,b', ...}; {} when none: the derived ops leave them out too). A script's reply costs per
--          table and per value (luaReplyToRedisReply: ~2k instructions a table, ~0.8k a string):
--          the nested reply of before, with every member listed, was ~29k of a one-to-one
--          message's ~440k (bench/reports/redis-cost.md, "the flush's reply").

local prefix, at, publishCmd, durableNow = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local record = { prefix, at, publishCmd, '0', durableNow, ARGV[14] }
local convs = {}
local i = 15
local n = 6
while i <= #ARGV do
  -- seq and count as numbers: conv_record.lua's tonumber of a number is not a strtod.
  local conv, seq, countText = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local count = setting(countText)
  local at, all, first = '', '', i + 3
  if not count then
    count = setting(string.sub(countText, 1, -2))
    at, all, first = ARGV[i + 3], ARGV[i + 4], i + 5
  end
  -- The mentions, 'uid=seq ...' (conv_record.lua indexes a read-diffused conversation's): most
  -- flushes have none, and their conversation step takes no more arguments than before.
  local mentioned
  for c = 0, count - 1 do
    local seqs = ARGV[first + 4 * c + 3]
    if seqs ~= '' then
      mentioned = mentioned or {}
      for text in string.gmatch(seqs, '%d+') do mentioned[#mentioned + 1] = ARGV[first + 4 * c] .. '=' .. text end
    end
  end
  record[n + 1], record[n + 2], record[n + 3] = conv, '', seq
  if at == '' and all == '' and not mentioned then
    record[n + 4] = count
    n = n + 4
  else
    record[n + 4], record[n + 5], record[n + 6], record[n + 7], record[n + 8] =
      count .. '+', at, all, '', mentioned and table.concat(mentioned, ' ') or ''
    n = n + 8
  end
  for c = 0, count - 1 do record[n + 1 + c] = ARGV[first + 4 * c] end
  n = n + count
  convs[#convs + 1] = { conv = conv, seq = seq, at = at, all = all, first = first, count = count }
  i = first + 4 * count
end
local recorded = script_convRecord(KEYS, record)

-- mergeOps: one op per (user, conversation); users in order of their first op. A user's ops are
-- a chain from opOf[uid] in order of creation: most users of a flush have one (a group
-- message's members), and a table per user for the list and its index was ~2 of the ~150k
-- instructions a member costs (bench/reports/redis-cost.md, "the symbol build's profile").
local users, opOf, opCount = {}, {}, 0
-- `at`: the conversation's last activity argument ('' = none): every op of it carries it.
local function newOp(conv, at)
  opCount = opCount + 1
  return { conv = conv, lastSeq = 0, readSeq = 0, mentions = '', at = at, count = 1, after = false }
end
local function opFor(uid, conv, at)
  local first = opOf[uid]
  if not first then
    first = newOp(conv, at)
    opOf[uid] = first
    users[#users + 1] = uid
    return first
  end
  local op = first
  while op.conv ~= conv do
    if not op.after then
      op.after = newOp(conv, at)
      first.count = first.count + 1
    end
    op = op.after
  end
  return op
end
-- conv -> its generation as this flush's conversation step read it (the message ops carry it).
local genOf = {}
for k, c in ipairs(convs) do
  local r = recorded[k]
  if type(r) == 'table' then
    genOf[c.conv] = r[4] or ''
    local listed = r[6]
    local large = r[2] == 1
    -- Which candidates are members: one pass over the listed uids against the few candidates
    -- (false: not seen listed), not a set of every member of a write-diffused conversation.
    local candidate = {}
    for j = 0, c.count - 1 do candidate[ARGV[c.first + 4 * j]] = false end
    for _, uid in ipairs(listed) do
      if candidate[uid] == false then candidate[uid] = true end
    end
    -- Issue 43: mentions of seqs the conversation holds recalled (conv_record.lua's `ahead`) are
    -- left out (this script carries no recall: no member's held mention goes).
    local drops
    if r[8] then
      drops = {}
      for d = 1, #r[8], 2 do
        local gone = {}
        for text in string.gmatch(r[8][d + 1], '%d+') do gone[text] = true end
        drops[r[8][d]] = gone
      end
    end
    for j = 0, c.count - 1 do
      local base = c.first + 4 * j
      local uid = ARGV[base]
      if candidate[uid] then
        local last, read, mentions = num(ARGV[base + 1]), num(ARGV[base + 2]), ARGV[base + 3]
        if drops and drops[uid] and mentions ~= '' then
          local kept = {}
          for text in string.gmatch(mentions, '%d+') do
            if not drops[uid][text] then kept[#kept + 1] = text end
          end
          mentions = table.concat(kept, ',')
        end
        if last > 0 or mentions ~= '' then
          local op = opFor(uid, c.conv, c.at)
          if last > op.lastSeq then op.lastSeq = last end
          if read > op.readSeq then op.readSeq = read end
          op.mentions = mentions
        end
      end
    end
    if not large then
      local top, all = c.seq, c.all
      for _, uid in ipairs(listed) do
        if string.byte(uid, 1) ~= 35 then -- '#': the conversation's own fields
          local op = opFor(uid, c.conv, c.at)
          if top > op.lastSeq then op.lastSeq = top end
          -- @all: a mention of every member (its sender's own read covers it: user_apply.lua
          -- keeps only mentions above readSeq); user_apply.lua merges, sorts and caps the list.
          if all ~= '' then op.mentions = op.mentions == '' and all or op.mentions .. ',' .. all end
        end
      end
    end
  end
end
-- The reply (the header): the counts, then each conversation's five values, then the absent
-- uids, then (withListed) each conversation's listed uids.
local function reply(applied, absent, withListed)
  local out = { applied, opCount, absent and #absent or 0 }
  local o = 3
  for k = 1, #convs do
    local r = recorded[k]
    if type(r) == 'table' then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = r[1], r[2], r[3], r[4], r[5]
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = false, false, false, false, false
    end
    o = o + 5
  end
  if absent then
    for k = 1, #absent do out[o + k] = absent[k] end
    o = o + #absent
  end
  if withListed then
    for k = 1, #convs do
      local r = recorded[k]
      out[o + k] = type(r) == 'table' and r[6] or {}
    end
    o = o + #convs
    for k = 1, #convs do
      local r = recorded[k]
      out[o + k] = type(r) == 'table' and r[8] or {}
    end
  end
  return out
end

if #users == 0 then return reply(1, nil, false) end
if opCount > setting(ARGV[13]) then return reply(0, nil, true) end

local apply = { ARGV[5], prefix, ARGV[6], ARGV[7], ARGV[8], ARGV[9], publishCmd, at, ARGV[10], '0', '0', durableNow, ARGV[11], ARGV[14] }
local check = ARGV[12]
local n = #apply
for _, uid in ipairs(users) do
  local op = opOf[uid]
  apply[n + 1], apply[n + 2], apply[n + 3], apply[n + 4] = uid, op.count, '', check
  n = n + 4
  while op do
    if op.at == '' then
      apply[n + 1], apply[n + 2], apply[n + 3], apply[n + 4], apply[n + 5], apply[n + 6] = 'm', op.conv, op.lastSeq, op.readSeq, op.mentions, genOf[op.conv]
      n = n + 6
    else
      apply[n + 1], apply[n + 2], apply[n + 3], apply[n + 4], apply[n + 5], apply[n + 6], apply[n + 7] = 'M', op.conv, op.lastSeq, op.readSeq, op.mentions, genOf[op.conv], op.at
      n = n + 7
    end
    op = op.after
  end
end
local epochs = script_userApply({}, apply)
local absent
if check == '1' then
  for k = 1, #users do
    if epochs[k] == 'absent' then absent = absent or {}; absent[#absent + 1] = users[k] end
  end
end
return reply(1, absent, absent ~= nil)
