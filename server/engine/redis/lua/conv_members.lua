-- conv_members.lua: add and remove members of an existing conversation.
--
-- KEYS[1] conv meta  hash: exists, maxSeq, large (1|0), category
-- KEYS[2] conv mem   set of member uids
-- ARGV[1] number of uids to add   ARGV[2..] the uids to add, then the uids to remove
-- Returns the member count after the change, or -1 for an unknown conversation

if redis.call('HGET', KEYS[1], 'exists') ~= '1' then return -1 end
local adds = tonumber(ARGV[1])
-- unpack() is bounded by the Lua C stack (LUAI_MAXCSTACK 8000): send in chunks.
local CHUNK = 1000
local function apply(cmd, first, last)
  local i = first
  while i <= last do
    local j = math.min(i + CHUNK - 1, last)
    redis.call(cmd, KEYS[2], unpack(ARGV, i, j))
    i = j + 1
  end
end
apply('SADD', 2, 1 + adds)
apply('SREM', 2 + adds, #ARGV)
return redis.call('SCARD', KEYS[2])
