-- user_state.lua: every record and the stored totals of one user, read in one atomic step. A
-- user the store has never seen gets nothing, and nothing is created. lib/user.lua comes first in the library.
--
-- KEYS[1] m  meta hash (totals: t, x, k:<category>)   KEYS[2] c  records hash (user_apply.lua)
-- ARGV[1] the Redis run id
-- Returns {epoch, version, {conv, record, ...}, {t, x, k:<category>, value, ...}}

local exists, epoch, version, total, mentions = userMeta(KEYS[1], ARGV[1], 't', 'x')
if not exists then return { epoch, 0, {}, {} } end
local totals = { total or '0', mentions or '0' }
local meta = redis.call('HGETALL', KEYS[1])
for i = 1, #meta, 2 do
  if string.sub(meta[i], 1, 2) == 'k:' then
    totals[#totals + 1] = string.sub(meta[i], 3)
    totals[#totals + 1] = meta[i + 1]
  end
end
return { epoch, version, redis.call('HGETALL', KEYS[2]), totals }
