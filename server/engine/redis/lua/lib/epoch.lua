-- lib/epoch.lua: the user's epoch and cursor, shared by every script that reads or creates an
-- epoch (user_apply, pull, user_state, position). Not a script of its own: scripts.ts prepends
-- this file to each of those scripts when loading them (SCRIPTS[...].prelude), so the line numbers
-- in a Redis error for them are off by this file's length.
--
-- An epoch is valid only under the Redis run it was last used in (redis-engine.ts, "Epochs and
-- the Redis run"): a Redis that lost its last writes keeps the epoch but its version goes back, so
-- the user's first script in a new run starts a new epoch. The version continues from what Redis
-- kept; the stream and snapshots stay (they match the kept state), so a cursor of the old epoch
-- gets a snapshot.
--
-- userMeta(metaKey, candidateEpoch, runId, field...): one HMGET of the user's meta hash (epoch,
-- rid, version and the extra fields named); starts a new epoch (candidateEpoch, since Lua cannot
-- make random ids) when there is none or it was last used under another run id. Returns the
-- epoch, the version (0 when none) and the extra fields' raw values (false when absent), in order.
local function userMeta(metaKey, candidateEpoch, runId, ...)
  local meta = redis.call('HMGET', metaKey, 'epoch', 'rid', 'version', ...)
  local epoch = meta[1]
  if not epoch or meta[2] ~= runId then
    epoch = candidateEpoch
    redis.call('HSET', metaKey, 'epoch', epoch, 'rid', runId)
  end
  return epoch, tonumber(meta[3] or '0'), unpack(meta, 4)
end
