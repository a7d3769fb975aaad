-- registry_list.lua: a conversation's registered topics or threads (sync/topics.ts,
-- sync/threads.ts), read with the conversation's existence in one step: an empty answer means
-- "none", never "Redis lost the conversation and its registry".
--
-- KEYS[1] the conversation hash   KEYS[2] its registry (topics: topic_add.lua; threads: thread_add.lua)
-- Returns the registry's entries, or 'absent' when Redis lacks the conversation (with the
-- durable tier the caller restores it, registry included, and calls again).

if redis.call('EXISTS', KEYS[1]) == 0 then return 'absent' end
return redis.call('HKEYS', KEYS[2])
