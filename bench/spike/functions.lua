#!lua name=spike

-- The spike's write path (issue 42): native max-registers, no rules. One call per message on
-- one Redis. KEYS: the heads key, then per member: last, read, stream, mentions.
-- ARGV: conv, seq, sender's index (1-based, 0 none), then per member: channel, mentioned (0/1).
-- Mentions are rare: a mentioned member's pending mentions (a hash conv → `seq,seq,…`) are read
-- and rewritten, a seq already there is not added again.
-- A member's stream gets one entry, and its channel one publish, only when a register moved
-- (CH): a duplicate or an older seq appends nothing.
local function mention(key, conv, seq)
  local seqs = redis.call('HGET', key, conv)
  if not seqs then
    redis.call('HSET', key, conv, seq)
    return 1
  end
  if string.find(',' .. seqs .. ',', ',' .. seq .. ',', 1, true) then return 0 end
  redis.call('HSET', key, conv, seqs .. ',' .. seq)
  return 1
end

local function message(keys, args)
  local conv, seq, sender = args[1], args[2], tonumber(args[3])
  redis.call('ZADD', keys[1], 'GT', seq, conv)
  local n = (#keys - 1) / 4
  local changed = 0
  for i = 1, n do
    local b = 1 + (i - 1) * 4
    local ch = redis.call('ZADD', keys[b + 1], 'GT', 'CH', seq, conv)
    if i == sender then ch = ch + redis.call('ZADD', keys[b + 2], 'GT', 'CH', seq, conv) end
    if args[3 + 2 * i] == '1' then ch = ch + mention(keys[b + 4], conv, seq) end
    if ch > 0 then
      local v = redis.call('RPUSH', keys[b + 3], conv)
      redis.call('PUBLISH', args[2 + 2 * i], v .. ' ' .. conv)
      changed = changed + 1
    end
  end
  return changed
end

-- One register raised (a read: readSeq; a mute setting: clock × 2 + muted, last writer wins by its
-- clock); append and publish when it moved. KEYS: register, stream. ARGV: conv, score, channel.
local function raise(keys, args)
  if redis.call('ZADD', keys[1], 'GT', 'CH', args[2], args[1]) == 0 then return 0 end
  local v = redis.call('RPUSH', keys[2], args[1])
  redis.call('PUBLISH', args[3], v .. ' ' .. args[1])
  return v
end

-- The fold's read: every register of one user, atomically, and its version.
-- KEYS: member, last, read, mute, mentions, stream.
local function fold_read(keys)
  return {
    redis.call('HGETALL', keys[1]),
    redis.call('ZRANGE', keys[2], 0, -1, 'WITHSCORES'),
    redis.call('ZRANGE', keys[3], 0, -1, 'WITHSCORES'),
    redis.call('ZRANGE', keys[4], 0, -1, 'WITHSCORES'),
    redis.call('HGETALL', keys[5]),
    redis.call('LLEN', keys[6]),
  }
end

-- The registers of the conversations named in `entries` (stream entries), appended to `out`:
-- their ids, then HMGET of membership, ZMSCORE of last, read and mute, HMGET of pending mentions.
-- KEYS: member, last, read, mute, mentions.
local function changed(keys, entries, out)
  local convs, seen = {}, {}
  for _, conv in ipairs(entries) do
    if not seen[conv] then
      seen[conv] = true
      convs[#convs + 1] = conv
    end
  end
  out[#out + 1] = convs
  if #convs == 0 then return out end
  out[#out + 1] = redis.call('HMGET', keys[1], unpack(convs))
  out[#out + 1] = redis.call('ZMSCORE', keys[2], unpack(convs))
  out[#out + 1] = redis.call('ZMSCORE', keys[3], unpack(convs))
  out[#out + 1] = redis.call('ZMSCORE', keys[4], unpack(convs))
  out[#out + 1] = redis.call('HMGET', keys[5], unpack(convs))
  return out
end

-- A pull: the conversations changed after the cursor, with their registers.
-- KEYS: member, last, read, mute, mentions, stream. ARGV: cursor (a version), limit.
local function pull(keys, args)
  local cursor, limit = tonumber(args[1]), tonumber(args[2])
  local entries = redis.call('LRANGE', keys[6], cursor, cursor + limit - 1)
  return changed(keys, entries, { redis.call('LLEN', keys[6]), cursor + #entries })
end

-- `GET /unread` from the newest snapshot (`<version>\n<folded registers>`, written by compaction)
-- and the conversations changed after it. KEYS: member, last, read, mute, mentions, stream, snapshot.
local function unread(keys)
  local snapshot = redis.call('GET', keys[7])
  local at = 0
  if snapshot then at = tonumber(string.sub(snapshot, 1, string.find(snapshot, '\n', 1, true) - 1)) end
  local entries = redis.call('LRANGE', keys[6], at, -1)
  return changed(keys, entries, { snapshot or '', at + #entries })
end

-- Compaction's write: the snapshot folded at stream position ARGV[1], unless one as new or newer
-- is there (a position is a max-register too: a slower compaction never replaces a newer one).
-- Registers raised after that position are in the stream after it, so no write is lost.
-- KEYS: snapshot. ARGV: version, text (`<version>\n…`).
local function snapshot(keys, args)
  local current = redis.call('GET', keys[1])
  if current and tonumber(string.sub(current, 1, string.find(current, '\n', 1, true) - 1)) >= tonumber(args[1]) then return 0 end
  redis.call('SET', keys[1], args[2])
  return 1
end

redis.register_function('spike_message', message)
redis.register_function('spike_raise', raise)
redis.register_function{ function_name = 'spike_fold_read', callback = fold_read, flags = { 'no-writes' } }
redis.register_function{ function_name = 'spike_pull', callback = pull, flags = { 'no-writes' } }
redis.register_function{ function_name = 'spike_unread', callback = unread, flags = { 'no-writes' } }
redis.register_function('spike_snapshot', snapshot)
