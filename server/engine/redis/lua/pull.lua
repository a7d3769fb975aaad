-- pull.lua: the user's changes after a cursor, or the newest snapshot and what follows it,
-- read in one atomic step (a port of MemoryEngine.pull and rules.ts needsReset).
--
-- KEYS[1] meta   hash: epoch, rid, version, base, members
-- KEYS[2] s      stream: <v>-0 entries {c, s}, <v>-1 snapshots {snap}
-- KEYS[3] snaps  list of snapshot versions, ascending
-- KEYS[4] large  set of read-diffused conversations the user is a member of
-- ARGV[1] candidate epoch (Lua cannot make random ids)   ARGV[2] the Redis run id (INFO server)
--         (KEYS[1], ARGV[1] and ARGV[2] go to userMeta of lib/epoch.lua, prepended when loading)
-- ARGV[3] cursor epoch ('-' = no cursor, '' = wildcard: trust the current epoch)   ARGV[4] cursor version   ARGV[5] limit
-- ARGV[6] snapshotEvery
-- Returns {epoch, version reached, more 1|0, snapshot 1|0, snapshot v, packed snapshot or '',
--          {v, conv, packed ConvState or '', ...}, {large conv, ...}}

local function int(n) return string.format('%d', n) end

-- The epoch (lib/epoch.lua, prepended: a new Redis run starts a new one, so a cursor from before
-- a restart gets a snapshot), and the other meta fields, in one read.
local epoch, version, base, members = userMeta(KEYS[1], ARGV[1], ARGV[2], 'base', 'members')
base = tonumber(base or '0')
members = tonumber(members or '0')
local latest = tonumber(redis.call('LINDEX', KEYS[3], -1) or '0')

local sinceEpoch = ARGV[3]
local sinceVersion = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local snapshotEvery = tonumber(ARGV[6])

local function needsReset()
  if sinceEpoch == '-' then return true end
  if sinceEpoch ~= '' and sinceEpoch ~= epoch then return true end
  if sinceVersion > version or sinceVersion < base then return true end
  local behind = version - sinceVersion
  return latest > sinceVersion and behind > math.max(snapshotEvery, members)
end

local reset = needsReset()
local from = sinceVersion
local snapshot = ''
if reset then
  from = latest
  if latest > 0 then
    local id = int(latest) .. '-1'
    local found = redis.call('XRANGE', KEYS[2], id, id)
    if not found[1] then return redis.error_reply('snapshot ' .. id .. ' missing from the stream') end
    local fields = found[1][2]
    for i = 1, #fields, 2 do
      if fields[i] == 'snap' then snapshot = fields[i + 1] end
    end
  end
end

-- Each version has an entry <v>-0 and maybe a snapshot <v>-1, so 2*limit ids cover `limit` entries.
local entries = {}
local reached = from
if limit > 0 then
  local rows = redis.call('XRANGE', KEYS[2], '(' .. int(from) .. '-1', '+', 'COUNT', int(2 * limit))
  local count = 0
  for _, row in ipairs(rows) do
    if count >= limit then break end
    local v, seq = string.match(row[1], '^(%d+)%-(%d+)$')
    if seq == '0' then
      local conv, state = '', ''
      local fields = row[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'c' then conv = fields[i + 1] elseif fields[i] == 's' then state = fields[i + 1] end
      end
      reached = tonumber(v)
      entries[#entries + 1] = reached
      entries[#entries + 1] = conv
      entries[#entries + 1] = state
      count = count + 1
    end
  end
end

local more = 0
if reached < version then more = 1 end
return { epoch, reached, more, reset and 1 or 0, latest, snapshot, entries, redis.call('SMEMBERS', KEYS[4]) }
