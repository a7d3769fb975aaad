-- admin/user_rebuild.lua: rebuild what one user's records determine, atomically: the stored
-- totals (t, x, k:<category>), the member count (n) and the large hash (L); with ARGV[3] = 1 the
-- stream also starts over under a new epoch (lib/rebuild.lua; lib/user.lua and lib/rebuild.lua come first in the library).
--
-- KEYS[1] m  KEYS[2] c  KEYS[3] s  KEYS[4] p  KEYS[5] L  (layouts: user_apply.lua)
-- ARGV[1] candidate epoch   ARGV[2] the Redis run id   ARGV[3] restream 1|0
-- ARGV[4] idle seconds (0: never)   ARGV[5] notification channel ('' = none)   ARGV[6] PUBLISH or SPUBLISH
-- A restream raises the version by one and puts base, snapshot version and a snapshot built from
-- the records at it, with no entries; a user without meta but with member records gets one.
-- It publishes one change under the new epoch, so connected clients pull that snapshot.
-- Returns 1 when something was written, 0 for a user with nothing to rebuild.

local keys = { meta = KEYS[1], records = KEYS[2], stream = KEYS[3], snapshot = KEYS[4], large = KEYS[5] }
return rebuildUser(keys, ARGV[1], ARGV[2], ARGV[3] == '1', tonumber(ARGV[4]), ARGV[5], ARGV[6])
