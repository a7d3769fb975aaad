-- conv_record.lua: for each conversation of an ingest flush, raise its maxSeq (max-merge) and
-- read, in the same atomic step, who is a member: every member of a write-diffused conversation,
-- or which of the candidates (senders, mentioned users) are members of a read-diffused one. A
-- raised head of a read-diffused conversation is published on its channel. A function with the
-- `allow-cross-slot-keys` flag: on a Redis Cluster one call carries the conversations of ONE master.
--
-- The conversation hash `<prefix>:{c:<conv>}` (conv_members.lua)
-- KEYS[1] the first conversation's hash (it routes the call; the others are on the same master)
-- ARGV[1] key prefix   ARGV[2] arrival time ('' = none)   ARGV[3] PUBLISH, SPUBLISH or '' (none)
-- ARGV[4] 1 on a cluster (check that each conversation is here before touching it), else 0
-- ARGV[5] durable tier: now in ms ('' = off): a raised head is marked 'h|<conv>' in the dirty
--         set of the conversation's slot (server/durable/)
-- ARGV[6] badge hook: now in ms ('' = off): a raised head of a read-diffused conversation is
--         marked in its slot's hook set (keys.ts hookConvsKey), its members at drain time
-- ARGV[7..] per conversation: conv, shard (keys.ts: the key suffix of its slot's dirty set),
--         seq, number of candidates (with a '+' after it: then at, the newest message-service
--         timestamp, ms, '' = none, @all seqs 'a,b', '' = none, the seqs that stop counting
--         'a,b' (issue 43: counts:false messages, recalls), '' = none, and the mentions
--         'uid=seq uid=seq', '' = none, follow: most messages carry none of them, and pay no
--         argument for them), the candidates. Every conversation keeps its non-counting seqs in
--         '#N' (rules.ts mergeNocount; kept across switches: a rewrite to write diffusion gives
--         them to the records). A read-diffused one indexes its mentions in the sorted set
--         K..':m' ('seq|uid' by seq, the newest NOCOUNT_CAP): a recall finds there whose mention
--         to drop (or, for a seq at or below its floor '#M', every member: recalledMentions), and a
--         mention of a seq recalled already is dropped at once. Every conversation keeps `at` as a
--         max-register in '#a' (membership ops give it to the members they make); a
--         read-diffused one also keeps the @all seqs, the newest `mention cap`, in '#@' (issue
--         43: engine.ts HeadExtra) above '#L', the head when it became read-diffused (one at
--         or below it was a write-diffused message, counted in its members' records already);
--         a write-diffused one's members' records count them.
-- Returns per conversation: 0 when it does not exist (nothing is created), else
-- {maxSeq, large 1|0, category, gen, member count, {uid, ...}[, held, ahead]} (issue 43, only
-- when any, each {uid, 'a,b', ...}: held, the members whose mentions of seqs recalled now the
-- index holds; ahead, those this flush mentions in seqs recalled already; gen and member count as stored:
-- texts, or false when unset; the caller parses them); for a write-diffused one the list
-- is HKEYS: the members plus the '#' fields, which the caller drops. On a cluster, a conversation
-- not on this master (a slot moved) ends the reply with the marker 'moved' before it is touched.

local prefix, at, publishCmd, checkLocal = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local durableNow, hookNow = ARGV[5], ARGV[6]
-- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK 8000): work in chunks.
local CHUNK = 1000

-- Members' seqs, {uid -> {seq, ...}} in order of first use, as a reply {uid, 'a,b', ...} (nil: none).
local function seqLists()
  local bySeq, order = {}, {}
  return {
    add = function(uid, seq)
      if not bySeq[uid] then bySeq[uid] = {}; order[#order + 1] = uid end
      local list = bySeq[uid]
      list[#list + 1] = seq
    end,
    reply = function()
      if #order == 0 then return nil end
      local out = {}
      for _, uid in ipairs(order) do
        out[#out + 1] = uid
        out[#out + 1] = table.concat(bySeq[uid], ',')
      end
      return out
    end,
  }
end

-- The mention index of a read-diffused conversation K (above): the mentions ('uid=seq ...') of
-- seqs in its '#N' (`kept`, nil: not read yet) are not indexed (returned as `ahead`), the others
-- are; the index's mentions of the seqs `nocount` ('a,b') recalls now leave it (returned as
-- `held`). '#M' is the index's floor: it holds every mention of the seqs above it (raised to the
-- head when the conversation becomes read-diffused or is restored, and past the pairs a full
-- index forgets); a seq recalled for the first time (not in `before`, '#N' before this flush) at
-- or below it may be mentioned in records the index never saw: every member is held for it (one
-- op each: rare, a recall of an old message). Only members are returned. Returns held, ahead
-- (each nil when none).
local function recalledMentions(K, kept, before, nocount, mentioned)
  local index = K .. ':m'
  local held, ahead = seqLists(), seqLists()
  if mentioned ~= '' then
    if kept == nil then kept = redis.call('HGET', K, '#N') end
    local gone = {}
    if kept then for text in string.gmatch(kept, '%d+') do gone[text] = true end end
    local added = false
    for uid, seq in string.gmatch(mentioned, '([^ =]+)=(%d+)') do
      if gone[seq] then
        if redis.call('HGET', K, uid) then ahead.add(uid, seq) end
      elseif redis.call('HGET', K, uid) then
        redis.call('ZADD', index, seq, seq .. '|' .. uid)
        added = true
      end
    end
    if added then
      local excess = redis.call('ZCARD', index) - NOCOUNT_CAP
      if excess > 0 then
        local last = redis.call('ZRANGE', index, excess - 1, excess - 1, 'WITHSCORES')
        redis.call('ZREMRANGEBYRANK', index, 0, excess - 1)
        if tonumber(last[2]) > num(redis.call('HGET', K, '#M')) then redis.call('HSET', K, '#M', last[2]) end
      end
    end
  end
  if nocount ~= '' then
    local had, floor, swept = {}, nil, {}
    if before then for text in string.gmatch(before, '%d+') do had[text] = true end end
    for seq in string.gmatch(nocount, '%d+') do
      if not had[seq] then
        floor = floor or num(redis.call('HGET', K, '#M'))
        if tonumber(seq) <= floor and not swept[seq] then
          swept[seq] = true
          swept[#swept + 1] = seq
        end
      end
      local found = redis.call('ZRANGEBYSCORE', index, seq, seq)
      if #found > 0 then
        redis.call('ZREMRANGEBYSCORE', index, seq, seq)
        if not swept[seq] then
          for _, pair in ipairs(found) do
            local uid = string.sub(pair, #seq + 2)
            if redis.call('HGET', K, uid) then held.add(uid, seq) end
          end
        end
      end
    end
    if #swept > 0 then
      for _, uid in ipairs(redis.call('HKEYS', K)) do
        if string.sub(uid, 1, 1) ~= '#' then
          for _, seq in ipairs(swept) do held.add(uid, seq) end
        end
      end
    end
  end
  return held.reply(), ahead.reply()
end

local out = {}
local i = 7
while i <= #ARGV do
  local conv, shard, seq, countText = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local lastAt, all, nocount, mentioned, first = '', '', '', '', i + 4
  local count = tonumber(countText)
  if not count then
    count = tonumber(string.sub(countText, 1, -2))
    lastAt, all, nocount, mentioned, first = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], i + 8
  end
  local last = first + count - 1
  i = last + 1
  local K = convKeyOf(prefix, conv)
  -- `at` ('#a', a max-register) is read and written with the head: a message that carries one
  -- (issue 43; most carry none, and read no more) costs no command of its own.
  local meta
  if checkLocal then
    if lastAt == '' then
      meta = redis.pcall('HMGET', K, '#s', '#l', '#c', '#g', '#n')
    else
      meta = redis.pcall('HMGET', K, '#s', '#l', '#c', '#g', '#n', '#a')
    end
    if meta.err then
      out[#out + 1] = 'moved'
      return out
    end
  elseif lastAt == '' then
    meta = redis.call('HMGET', K, '#s', '#l', '#c', '#g', '#n')
  else
    meta = redis.call('HMGET', K, '#s', '#l', '#c', '#g', '#n', '#a')
  end
  if not meta[1] then
    out[#out + 1] = 0
  else
    local maxSeq = num(meta[1])
    local raised = seq > maxSeq
    local atRaised = lastAt ~= '' and (not meta[6] or tonumber(lastAt) > tonumber(meta[6]))
    if raised then
      maxSeq = seq
      if atRaised then
        redis.call('HSET', K, '#s', int(seq), '#a', lastAt)
      else
        redis.call('HSET', K, '#s', int(seq))
      end
      if durableNow ~= '' then redis.call('ZADD', dirtyConvsKeyOf(prefix, shard), 'NX', durableNow, 'h|' .. conv) end
    elseif atRaised then
      redis.call('HSET', K, '#a', lastAt)
    end
    local large = meta[2] == '1'
    local extraMoved = atRaised
    local kept, before
    if nocount ~= '' then
      kept = redis.call('HGET', K, '#N')
      before = kept
      local merged = mergeNocountText(kept, nocount)
      if merged ~= kept then
        redis.call('HSET', K, '#N', merged)
        kept = merged
        extraMoved = true
      end
    end
    local held, ahead
    if large and (mentioned ~= '' or nocount ~= '') then held, ahead = recalledMentions(K, kept, before, nocount, mentioned) end
    local members
    if not large then
      members = redis.call('HKEYS', K)
    else
      members = {}
      local c = first
      while c <= last do
        local d = math.min(c + CHUNK - 1, last)
        local tags = redis.call('HMGET', K, unpack(ARGV, c, d))
        for k = c, d do
          if tags[k - c + 1] then members[#members + 1] = ARGV[k] end
        end
        c = d + 1
      end
      if raised and hookNow ~= '' then redis.call('ZADD', hookConvsKeyOf(prefix, shard), 'NX', hookNow, conv) end
      local allCounted = ''
      if all ~= '' then
        local allFloor = num(redis.call('HGET', K, '#L'))
        local kept = redis.call('HGET', K, '#@')
        local merged = mergeAllSeqs(kept, all, allFloor)
        if merged ~= kept then
          redis.call('HSET', K, '#@', merged)
          extraMoved = true
        end
        allCounted = mergeAllSeqs(nil, all, allFloor)
      end
      -- The push carries what these messages add (rules.ts headPushExtras): a late recall or
      -- @all moves no head but changes the members' counts.
      -- A plain message publishes `maxSeq|arrival` as before, and pays for nothing more.
      if publishCmd ~= '' then
        if lastAt ~= '' or allCounted ~= '' or nocount ~= '' then
          local gone = nocount ~= '' and mergeNocountText(nil, nocount) or ''
          redis.call(publishCmd, convChannelOf(prefix, conv), int(maxSeq) .. '|' .. at .. '|' .. lastAt .. '|' .. allCounted .. '|' .. gone)
        elseif raised then
          redis.call(publishCmd, convChannelOf(prefix, conv), int(maxSeq) .. '|' .. at)
        end
      end
    end
    -- The durable tier writes them with the head ('h' mark): marked also when the head did not move.
    if extraMoved and not raised and durableNow ~= '' then redis.call('ZADD', dirtyConvsKeyOf(prefix, shard), 'NX', durableNow, 'h|' .. conv) end
    out[#out + 1] = { maxSeq, large and 1 or 0, meta[3], meta[4], meta[5], members, held or false, ahead }
  end
end
return out
