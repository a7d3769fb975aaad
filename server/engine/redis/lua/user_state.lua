-- user_state.lua: every record and the stored totals of one user, read in one atomic step. A
-- user the store has never seen gets nothing, and nothing is created. lib/user.lua comes first in the library.
--
-- KEYS[1] m  meta hash (totals: the packed counters' and k:<category>)   KEYS[2] c  records hash (user_apply.lua)
-- KEYS[3] q  the mutedMentions setting (keys.ts mutedMentionsKey), read in this step: the badge
--   and the stream it is summed from are of one moment (sync-service.ts setMutedMentions)
-- ARGV[1] the Redis run id
-- ARGV[2] the conversation key head (keys.ts convKeyHead), or '' : with it, the head of each
--   read-diffused conversation the user is a member of is read in this step too (one Redis, where
--   the conversations' keys are on this server; on a Cluster they are not, and the caller reads them)
-- Returns {epoch, version, {conv, record, ...}, {t, x, k:<category>, value, ...}, {conv, head, ...},
-- the setting's raw value} (the heads of the conversations that have one; a conversation Redis
-- lacks is left out; the setting '1', '0', or '' when the key is missing: redis-read-positions.ts
-- mutedMentionsOf says what that means).

local mutedMentions = redis.call('GET', KEYS[3]) or ''
local exists, epoch, version, _, _, _, _, total, mentions, defaultTotal = userMeta(KEYS[1], ARGV[1])
if not exists then return { epoch, 0, {}, {}, {}, mutedMentions } end
local totals = { int(total), int(mentions) }
if defaultTotal ~= 0 then
  totals[3] = 'default'
  totals[4] = int(defaultTotal)
end
local meta = redis.call('HGETALL', KEYS[1])
for i = 1, #meta, 2 do
  -- k:default is a text field only in a meta from before the packing: its counter is read above.
  if string.sub(meta[i], 1, 2) == 'k:' and meta[i] ~= 'k:default' then
    totals[#totals + 1] = string.sub(meta[i], 3)
    totals[#totals + 1] = meta[i + 1]
  end
end
local records = redis.call('HGETALL', KEYS[2])
local heads = {}
local convKeyHead = ARGV[2]
if convKeyHead ~= '' then
  for i = 1, #records, 2 do
    local raw = records[i + 1]
    -- A member's (flag 1) large (flag 4) record: the record text's first four characters are its flags.
    if byte(raw, 1) == 49 and byte(raw, 4) == 49 then appendHead(heads, convKeyHead, records[i]) end
  end
end
return { epoch, version, records, totals, heads, mutedMentions }
