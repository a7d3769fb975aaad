-- topic_ready.lua: marks a registered topic's child conversation complete (created with the
-- parent's roster, sync/topics.ts): later messages of the topic skip creating it. A topic not in
-- the registry (or a conversation Redis lacks) is left alone: the mark never registers a topic.
--
-- KEYS[1] the conversation hash   KEYS[2] its topic registry   ARGV[1] topic
-- Returns 1 when marked, else 0.

if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], '1')
return 1
