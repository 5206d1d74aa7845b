-- resume.lua: KEYS L; ARGV from owner (a lease's owner, without the
-- attempt), token, to owner (with its attempt, see attemptOwner), TTL ms
-- (the lease's TTL plus its lock-delay), metadata. If L is held by an
-- attempt of the from owner with that token, it sets L to the to owner,
-- the same token and the metadata, for TTL, and returns 1; otherwise 0.
-- The mark needs nothing: the token's write-back raised it on this master.
local v = redis.call('GET', KEYS[1])
local p = ARGV[1] .. '#'
if not v or string.sub(v, 1, #p) ~= p then return 0 end
local f = string.match(v, '^[^|]*|(%d+)|')
if f ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[3] .. '|' .. f .. '|' .. ARGV[5], 'PX', ARGV[4])
return 1
