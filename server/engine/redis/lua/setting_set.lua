-- setting_set.lua: a user's setting (shareReads, mutedMentions) as a PostgreSQL write left it,
-- unless Redis holds it from that write or a later one. Two processes writing at once each write
-- PostgreSQL, then Redis: whichever reaches Redis last, the value PostgreSQL kept is the one
-- Redis keeps (setting-text.ts; a text without a revision is revision 0).
--
-- KEYS[1] the setting's key   ARGV[1] its text, '<rev>:<1|0>'
-- Returns 1 when written, 0 when Redis holds this revision or a newer one.

local function revOf(text)
  return tonumber(string.match(text, SETTING_REV)) or 0
end

local held = redis.call('GET', KEYS[1])
if held and revOf(held) >= revOf(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
