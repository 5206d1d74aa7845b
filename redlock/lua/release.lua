-- release.lua, after owner_held.lua: KEYS L; ARGV owner, channel, message.
-- If the owner holds L it deletes L, publishes message on channel and
-- returns 1; otherwise 0.
if not mine then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
