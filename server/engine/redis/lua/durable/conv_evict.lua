-- durable/conv_evict.lua: remove a conversation from Redis whose members are all cold, once
-- PostgreSQL holds exactly what Redis holds: the head and membership generation the caller
-- found in PostgreSQL are still Redis's, no mark waits for the drainer, and no member rewrite is
-- pending. Atomic with every conversation step (which would raise the head or the generation, or
-- mark it), so a message or membership change racing the eviction either lands first and keeps
-- the conversation, or finds it gone and restores it from PostgreSQL.
--
-- KEYS[1] the conversation hash (conv_members.lua)   KEYS[2] the dirty set of its slot
-- KEYS[3] the evicted set of its slot (the conversation enters it with this eviction's stamp)
-- KEYS[4] its topic registry (topic_add.lua), dropped with it: PostgreSQL holds every topic
-- (written before topic_add's caller goes on) and conv_restore.lua puts them back
-- KEYS[5] its thread registry (thread_add.lua), dropped with it likewise: PostgreSQL holds every
-- root whose child was made (written before thread_add's caller makes it), '0' ones too
-- ARGV[1] conv   ARGV[2] the head PostgreSQL holds   ARGV[3] the generation PostgreSQL holds
-- ARGV[4] its member of the evicted set (keys.ts evictedConvMember)
-- Returns 1 when evicted, 0 when Redis holds something PostgreSQL does not (or nothing).

local meta = redis.call('HMGET', KEYS[1], '#s', '#g', '#r')
if not meta[1] or meta[1] ~= ARGV[2] or (meta[2] or '0') ~= ARGV[3] or meta[3] then return 0 end
local marks = redis.call('ZMSCORE', KEYS[2], 'h|' .. ARGV[1], 'm|' .. ARGV[1])
if marks[1] or marks[2] then return 0 end
-- Its mention index (conv_record.lua ':m', in its slot) goes with it: PostgreSQL does not keep it.
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[1] .. ':m')
redis.call('ZADD', KEYS[3], evictionStamp(), ARGV[4])
return 1
