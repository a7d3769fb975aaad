-- pull.lua: the user's changes after a cursor, or the snapshot and what follows it, read in one
-- atomic step (a port of MemoryEngine.pull and rules.ts needsReset). lib/user.lua comes first in the library.
--
-- KEYS[1] m  meta hash   KEYS[2] c  records hash   KEYS[3] s  entries list   KEYS[4] p  snapshot
-- KEYS[5] L  large hash  (layouts: user_apply.lua)
-- KEYS[6] q  the mutedMentions setting (keys.ts mutedMentionsKey), read in this step: a page that
--   shows the stream's restart shows the setting that caused it (sync-service.ts setMutedMentions)
-- ARGV[1] the Redis run id   ARGV[2] cursor epoch ('-' = no cursor, '' = wildcard: trust the
-- current epoch)   ARGV[3] cursor version   ARGV[4] limit   ARGV[5] snapshotEvery
-- ARGV[6] streamMaxLen   ARGV[7] idle seconds
-- ARGV[8] the activity set of the user's slot ('' = none; durable tier)   ARGV[9] uid
-- ARGV[10] now in ms   ARGV[11] activity interval in ms (lib/user.lua touchDue)
-- ARGV[12] the conversation key head (keys.ts convKeyHead), or '': with it, the heads of the large
--   conversations are read in this step too (user_state.lua says when)
-- Returns {epoch, version reached, more 1|0, snapshot 1|0, snapshot v, snapshot text,
--          {entry text, ...} (versions from+1, from+2, ...), {large conv, ...}, {conv, head, ...},
--          the setting's raw value: '1', '0', or '' when the key is missing (user_state.lua's)}

local keys = { meta = KEYS[1], records = KEYS[2], stream = KEYS[3], snapshot = KEYS[4] }
local exists, epoch, version, base, members, sv, expiredAt, total, mentions, defaultTotal, w, lastActive, legacy =
  userMeta(keys.meta, ARGV[1])
local mutedMentions = redis.call('GET', KEYS[6]) or ''
if not exists then return { epoch, 0, 0, 1, 0, '', {}, {}, {}, mutedMentions } end
-- Writes the counters as they are now (the activity or the stream's restart moved them).
local function writeMeta()
  writeCounters(keys.meta, legacy, version, base, members, sv, expiredAt, total, mentions, defaultTotal, w, lastActive)
  legacy = false
end
if ARGV[8] ~= '' then
  local nowMs = tonumber(ARGV[10])
  if touchDue(lastActive, nowMs, tonumber(ARGV[11])) then
    redis.call('ZADD', ARGV[8], nowMs, ARGV[9])
    lastActive = nowMs
    writeMeta()
  end
end

local sinceEpoch = ARGV[2]
local sinceVersion = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local interval = snapshotInterval(tonumber(ARGV[5]), tonumber(ARGV[6]), members)
local idle = tonumber(ARGV[7])

local function needsReset()
  if sinceEpoch == '-' then return true end
  if sinceEpoch ~= '' and sinceEpoch ~= epoch then return true end
  if sinceVersion > version or sinceVersion < base then return true end
  return sv > sinceVersion and version - sinceVersion > interval
end

local function restart()
  restartStream(keys, {}, idle)
  base, sv = version, version
  writeMeta()
end

local reset = needsReset()
local snapshot = ''
if reset and sv > 0 then
  snapshot = redis.call('GET', keys.snapshot)
  if not snapshot then
    restart()
    snapshot = redis.call('GET', keys.snapshot)
  end
end
local from = sinceVersion
if reset then from = sv end
local entries = {}
local want = math.min(limit, version - from)
if want > 0 then
  entries = redis.call('LRANGE', keys.stream, from - base, from - base + want - 1)
  if #entries ~= want then
    -- The list expired while idle: history restarts at the current version.
    restart()
    reset = needsReset()
    snapshot = reset and redis.call('GET', keys.snapshot) or ''
    from = reset and sv or sinceVersion
    entries = {}
  end
end
local reached = from + #entries
local more = 0
if reached < version then more = 1 end
local large = redis.call('HKEYS', KEYS[5])
local heads = {}
if ARGV[12] ~= '' then
  for _, conv in ipairs(large) do appendHead(heads, ARGV[12], conv) end
end
return { epoch, reached, more, reset and 1 or 0, sv, snapshot, entries, large, heads, mutedMentions }
