-- thread_add.lua: threads (sync/threads.ts, PROTOCOL.md "Threads"). Adds a root to its
-- conversation's thread registry, atomically with the conversation's existence: a deleted
-- conversation's registry is never made again by a reply or follow still on its way.
--
-- KEYS[1] the conversation hash   KEYS[2] its thread registry (hash root -> '0'|'1')
-- ARGV[1] the root   ARGV[2] '0' to register it, '1' once the durable tier holds it (a root
-- registered '1' stays so)
-- Returns 'added' (registered, not known to be in PostgreSQL: the caller with the durable tier
-- writes it through, then calls again with '1'), 'saved' (held by PostgreSQL), or 'absent' when
-- Redis lacks the conversation (nothing written: with the durable tier the caller restores it
-- and calls again).

if redis.call('EXISTS', KEYS[1]) == 0 then return 'absent' end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[2], ARGV[1], '1')
  return 'saved'
end
if redis.call('HGET', KEYS[2], ARGV[1]) == '1' then return 'saved' end
redis.call('HSET', KEYS[2], ARGV[1], '0')
return 'added'
