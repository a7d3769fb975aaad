#!lua name=spike

-- The spike's write path (issue 42): native max-registers, no rules. One call per message on
-- one Redis. KEYS: the heads key, then per member: last, read, stream, mentions.
-- ARGV: conv, seq, sender's index (1-based, 0 none), then per member: channel, mentioned (0/1),
-- and last the mention's member (`conv\0seq`).
-- A member's stream gets one entry, and its channel one publish, only when a register moved
-- (CH): a duplicate or an older seq appends nothing.
local function message(keys, args)
  local conv, seq, sender = args[1], args[2], tonumber(args[3])
  redis.call('ZADD', keys[1], 'GT', seq, conv)
  local n = (#keys - 1) / 4
  local changed = 0
  for i = 1, n do
    local b = 1 + (i - 1) * 4
    local ch = redis.call('ZADD', keys[b + 1], 'GT', 'CH', seq, conv)
    if i == sender then ch = ch + redis.call('ZADD', keys[b + 2], 'GT', 'CH', seq, conv) end
    if args[3 + 2 * i] == '1' then ch = ch + redis.call('ZADD', keys[b + 4], 'NX', 'CH', 0, args[#args]) end
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
    redis.call('ZRANGE', keys[5], 0, -1),
    redis.call('LLEN', keys[6]),
  }
end

-- A pull: the conversations changed after the cursor, each with its registers.
-- KEYS: member, last, read, mute, mentions, stream. ARGV: cursor (a version), limit.
local function pull(keys, args)
  local cursor, limit = tonumber(args[1]), tonumber(args[2])
  local version = redis.call('LLEN', keys[6])
  local entries = redis.call('LRANGE', keys[6], cursor, cursor + limit - 1)
  local seen, out = {}, { version, cursor + #entries }
  for _, conv in ipairs(entries) do
    if not seen[conv] then
      seen[conv] = true
      out[#out + 1] = conv
      out[#out + 1] = redis.call('HGET', keys[1], conv) or ''
      out[#out + 1] = redis.call('ZSCORE', keys[2], conv) or '0'
      out[#out + 1] = redis.call('ZSCORE', keys[3], conv) or '0'
      out[#out + 1] = redis.call('ZSCORE', keys[4], conv) or '0'
      out[#out + 1] = redis.call('ZRANGE', keys[5], '[' .. conv .. '\0', '(' .. conv .. '\1', 'BYLEX')
    end
  end
  return out
end

redis.register_function('spike_message', message)
redis.register_function('spike_raise', raise)
redis.register_function{ function_name = 'spike_fold_read', callback = fold_read, flags = { 'no-writes' } }
redis.register_function{ function_name = 'spike_pull', callback = pull, flags = { 'no-writes' } }
