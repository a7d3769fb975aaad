-- topic_add.lua: topics (sync/topics.ts, PROTOCOL.md "Topics"). Adds a topic to its conversation's
-- registry unless the registry is full: the cap is checked and the topic added in one step, so
-- two processes adding the 100th and 101st topic at once cannot both get in.
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] its topic registry (hash topic -> '0'|'1')
-- ARGV[1] topic   ARGV[2] the cap (LIMITS.topicsPerConversation)
-- Returns 'added', 'present' (registered, its child not marked complete), 'ready' (complete:
-- topic_ready.lua), 'full' (nothing written), or 'absent' when Redis lacks the conversation
-- (nothing written: with the durable tier the caller restores it and calls again).

if redis.call('EXISTS', KEYS[1]) == 0 then return 'absent' end
local state = redis.call('HGET', KEYS[2], ARGV[1])
if state == '1' then return 'ready' end
if state then return 'present' end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[2]) then return 'full' end
redis.call('HSET', KEYS[2], ARGV[1], '0')
return 'added'
