-- release_any.lua is release.lua for a key set by any attempt of the
-- owner's acquisition: its value starts with ARGV owner .. '#'. KEYS L;
-- ARGV owner, channel, message.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '#' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
