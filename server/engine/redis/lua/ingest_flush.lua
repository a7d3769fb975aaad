-- ingest_flush.lua: a whole ingest flush on ONE Redis in one call: the conversation step of every
-- conversation (conv_record.lua, unchanged), then the message ops it implies (a port of
-- ingest.ts mergeOps), then every user step (user_apply.lua, unchanged), each user's ops
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
-- ARGV[14..] per conversation: conv, seq (the newest of the flush), number of candidates, then
--          per candidate (senders, mentioned users, distinct): uid, lastSeq (0: not a sender or
--          mentioned), readSeq (its own message's seq when a sender, else 0), mention seqs 'a,b'
-- Returns {conv_record.lua's reply, {uid, ...} in the order applied, user_apply.lua's reply
--          (per user: epoch or 'absent'), 1 | 0 when the user ops were too many and not applied}

local prefix, at, publishCmd, durableNow = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local record = { prefix, at, publishCmd, '0', durableNow }
local convs = {}
local i = 14
while i <= #ARGV do
  local conv, seq, count = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local n = #record
  record[n + 1], record[n + 2], record[n + 3], record[n + 4] = conv, '', seq, count
  for c = 0, count - 1 do record[n + 5 + c] = ARGV[i + 3 + 4 * c] end
  convs[#convs + 1] = { conv = conv, seq = seq, first = i + 3, count = count }
  i = i + 3 + 4 * count
end
local recorded = script_convRecord(KEYS, record)

-- mergeOps: one op per (user, conversation); users in order of their first op. A user's ops are
-- a chain from opOf[uid] in order of creation: most users of a flush have one (a group
-- message's members), and a table per user for the list and its index was ~2 of the ~150k
-- instructions a member costs (bench/reports/redis-cost.md, "the symbol build's profile").
local users, opOf, opCount = {}, {}, 0
local function newOp(conv)
  opCount = opCount + 1
  return { conv = conv, lastSeq = 0, readSeq = 0, mentions = '', count = 1, after = false }
end
local function opFor(uid, conv)
  local first = opOf[uid]
  if not first then
    first = newOp(conv)
    opOf[uid] = first
    users[#users + 1] = uid
    return first
  end
  local op = first
  while op.conv ~= conv do
    if not op.after then
      op.after = newOp(conv)
      first.count = first.count + 1
    end
    op = op.after
  end
  return op
end
for k, c in ipairs(convs) do
  local r = recorded[k]
  if type(r) == 'table' then
    local listed = r[6]
    local large = r[2] == 1
    -- Which candidates are members: one pass over the listed uids against the few candidates
    -- (false: not seen listed), not a set of every member of a write-diffused conversation.
    local candidate = {}
    for j = 0, c.count - 1 do candidate[ARGV[c.first + 4 * j]] = false end
    for _, uid in ipairs(listed) do
      if candidate[uid] == false then candidate[uid] = true end
    end
    for j = 0, c.count - 1 do
      local base = c.first + 4 * j
      local uid = ARGV[base]
      if candidate[uid] then
        local last, read, mentions = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), ARGV[base + 3]
        if last > 0 or mentions ~= '' then
          local op = opFor(uid, c.conv)
          if last > op.lastSeq then op.lastSeq = last end
          if read > op.readSeq then op.readSeq = read end
          op.mentions = mentions
        end
      end
    end
    if not large then
      local top = tonumber(c.seq)
      for _, uid in ipairs(listed) do
        if string.byte(uid, 1) ~= 35 then -- '#': the conversation's own fields
          local op = opFor(uid, c.conv)
          if top > op.lastSeq then op.lastSeq = top end
        end
      end
    end
  end
end
if #users == 0 then return { recorded, {}, {}, 1 } end
if opCount > tonumber(ARGV[13]) then return { recorded, {}, {}, 0 } end

local apply = { ARGV[5], prefix, ARGV[6], ARGV[7], ARGV[8], ARGV[9], publishCmd, at, ARGV[10], '0', '0', durableNow, ARGV[11] }
local check = ARGV[12]
local n = #apply
for _, uid in ipairs(users) do
  local op = opOf[uid]
  apply[n + 1], apply[n + 2], apply[n + 3], apply[n + 4] = uid, op.count, '', check
  n = n + 4
  while op do
    apply[n + 1], apply[n + 2], apply[n + 3], apply[n + 4], apply[n + 5] = 'm', op.conv, op.lastSeq, op.readSeq, op.mentions
    n = n + 5
    op = op.after
  end
end
return { recorded, users, script_userApply({}, apply), 1 }
