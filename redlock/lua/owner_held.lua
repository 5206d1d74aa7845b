-- owner_held.lua sets v to L's value, and mine to whether ARGV[1] holds L.
local v = redis.call('GET', KEYS[1])
local mine = v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|'
