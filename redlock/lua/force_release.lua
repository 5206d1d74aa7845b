-- force_release.lua: KEYS L; ARGV channel. It deletes L whatever its
-- owner, publishes a release on channel, and returns 1 if L was held.
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], 'r')
return 1
