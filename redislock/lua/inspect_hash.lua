-- inspect_hash.lua: KEYS K, found to be a hash. Returns the server's time
-- in ms and the hash's fields and values, for Inspect to drop expired
-- holders; or, if the key has become a string since (the last holder
-- left: a tombstone, or an exclusive holder's value), {time, value, PTTL};
-- or {time} if it is gone.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ty = redis.call('TYPE', KEYS[1]).ok
if ty == 'hash' then return {now, redis.call('HGETALL', KEYS[1])} end
if ty == 'string' then return {now, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])} end
return {now}
