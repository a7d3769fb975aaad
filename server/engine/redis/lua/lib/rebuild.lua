-- lib/rebuild.lua: rebuild what one user's records determine, atomically: the stored totals
-- (the packed counters' and k:<category>), the member count (n) and the large hash (L); with `restream` (or for a
-- user without meta but with member records) the stream also starts over under `epoch`: the
-- version goes up by one and base, snapshot version and a snapshot built from the records are
-- put at it, with no entries, and one change is published under the new epoch so connected
-- clients pull that snapshot (rules.ts contribution). Used by admin/user_rebuild.lua and by the
-- durable tier's user_restore.lua; lib/user.lua comes before it.
-- Returns 1 when something was written, 0 for a user with nothing to rebuild.
local function rebuildUser(keys, epoch, runId, restream, idle, channel, publishCmd)
  local all = redis.call('HGETALL', keys.records)
  local total, mentions, members = 0, 0, 0
  local categories, large = {}, {}
  local firstState
  for i = 1, #all, 2 do
    local r = decodeRecord(all[i], all[i + 1])
    if r.member then
      members = members + 1
      if not firstState then firstState = stateText(r) end
      if r.large then
        large[#large + 1] = r.conv
        large[#large + 1] = '1'
      else
        local unread, m, category = contribution(r)
        total = total + unread
        mentions = mentions + m
        if unread ~= 0 then categories[category] = (categories[category] or 0) + unread end
      end
    end
  end

  local meta = redis.call('HMGET', keys.meta, 'e', META_PACKED)
  local exists = meta[1] ~= false
  if not exists and members == 0 then return 0 end
  local version, base, _, sv, expiredAt, _, _, _, w, lastActive, legacy = counters(keys.meta, meta[2])

  -- The meta's text fields besides the counters: the other categories' totals (the default's is a counter).
  local fields = {}
  local gone = {}
  for _, field in ipairs(redis.call('HKEYS', keys.meta)) do
    if string.sub(field, 1, 2) == 'k:' and field ~= 'k:default' and not categories[string.sub(field, 3)] then gone[#gone + 1] = field end
  end
  for category, n in pairs(categories) do
    if category ~= 'default' then
      fields[#fields + 1] = 'k:' .. category
      fields[#fields + 1] = int(n)
    end
  end

  redis.call('DEL', keys.large)
  local CHUNK = 1000
  for i = 1, #large, CHUNK do
    redis.call('HSET', keys.large, unpack(large, i, math.min(i + CHUNK - 1, #large)))
  end

  restream = restream or not exists
  if restream then
    version = version + 1
    base, sv = version, version
    for _, v in ipairs({ 'e', epoch, 'r', runId }) do
      fields[#fields + 1] = v
    end
    restartStream(keys, {}, idle)
  end
  writeCounters(keys.meta, legacy, version, base, members, sv, expiredAt, total, mentions, categories.default or 0, w, lastActive, unpack(fields))
  if #gone > 0 then redis.call('HDEL', keys.meta, unpack(gone)) end
  if restream and firstState and channel ~= '' then
    redis.call(publishCmd, channel, epoch .. '|\n' .. int(version) .. '|' .. firstState)
  end
  return 1
end
