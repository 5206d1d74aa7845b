-- fence.lua, after owner_held.lua and raise_mark.lua: KEYS L, F; ARGV
-- owner, token, metadata, mark seconds. If the owner still holds L it
-- writes the token into L (keeping L's expiry) and raises F to it, and
-- returns 1; otherwise 0.
if not mine then return 0 end
local p = redis.call('PTTL', KEYS[1])
if p <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', p)
raiseMark(ARGV[2], ARGV[4])
return 1
