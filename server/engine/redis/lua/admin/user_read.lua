-- admin/user_read.lua: everything stored for one user, read in one atomic step (for checking).
-- Writes nothing: not even the epoch rotation a new Redis run would cause (lib/user.lua).
--
-- KEYS[1] m  meta hash   KEYS[2] c  records hash   KEYS[3] s  entries list   KEYS[4] p  snapshot
-- KEYS[5] L  large hash  (layouts: user_apply.lua)
-- Returns {meta field/value..., record field/value..., stream length, {entries after the
--          snapshot version}, snapshot text or nil, {large conv...}, stream TTL, snapshot TTL}

-- The meta's fields, the packed counters among them as the text fields of before the packing
-- (user-meta.ts legacy names), so the reader sees one layout.
local raw = redis.call('HGETALL', KEYS[1])
local meta, packed = {}, nil
for i = 1, #raw, 2 do
  if raw[i] == META_PACKED then
    packed = raw[i + 1]
  else
    meta[#meta + 1] = raw[i]
    meta[#meta + 1] = raw[i + 1]
  end
end
if packed then
  local values = { sunpack(META_PACK, packed) }
  for i, name in ipairs(META_LEGACY) do
    meta[#meta + 1] = name
    meta[#meta + 1] = int(values[i])
  end
end
local base, sv = 0, 0
for i = 1, #meta, 2 do
  if meta[i] == 'b' then base = tonumber(meta[i + 1]) elseif meta[i] == 'sv' then sv = tonumber(meta[i + 1]) end
end
local length = redis.call('LLEN', KEYS[3])
local after = {}
-- Index of the entry at sv + 1 (base <= sv, unless the meta is corrupt: then from the start).
local from = math.max(0, sv - base)
if from < length then after = redis.call('LRANGE', KEYS[3], from, -1) end
return {
  meta, redis.call('HGETALL', KEYS[2]), length, after, redis.call('GET', KEYS[4]),
  redis.call('HKEYS', KEYS[5]), redis.call('TTL', KEYS[3]), redis.call('TTL', KEYS[4]),
}
