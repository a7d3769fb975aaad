-- thread_add.lua: threads (sync/threads.ts, PROTOCOL.md "Threads"). Adds a root to its
-- conversation's thread registry, atomically with the conversation's existence: a deleted
-- conversation's registry is never made again by a reply or follow still on its way.
--
-- KEYS[1] the conversation hash   KEYS[2] its thread registry (a set of roots)
-- ARGV[1] the root
-- Returns 'added' (or already there), or 'absent' when Redis lacks the conversation (with the
-- durable tier the caller restores it and calls again).

if redis.call('EXISTS', KEYS[1]) == 0 then return 'absent' end
redis.call('SADD', KEYS[2], ARGV[1])
return 'added'
