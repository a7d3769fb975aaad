-- hook/presence.lua: one server process's live sockets of one user, for the badge hook's
-- socket-less rule (engine/badge-marks.ts setPresence; keys.ts hookPresenceKey). A process
-- refreshes its entry while it holds a socket of the user and removes it when the last one
-- closes; the hash expires with its newest entry, so a dead process's entries lapse by themselves.
--
-- KEYS[1] the user's presence hash
-- ARGV[1] the process id   ARGV[2] until when (ms; '' removes the process's entry)
-- Returns 1.

local key, process, untilMs = KEYS[1], ARGV[1], ARGV[2]
if untilMs == '' then
  redis.call('HDEL', key, process)
  return 1
end
redis.call('HSET', key, process, untilMs)
-- The hash lives as long as its newest entry (PEXPIREAT GT: an older entry never shortens it).
if redis.call('PEXPIRETIME', key) < tonumber(untilMs) then redis.call('PEXPIREAT', key, untilMs) end
return 1
