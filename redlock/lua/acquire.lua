-- acquire.lua, after epoch.lua and owner_held.lua: KEYS L, F, E; ARGV
-- owner, TTL ms, metadata. If L is free or the owner's, it sets L to
-- "owner|0|metadata" for TTL and returns {1, candidate token, age}: the
-- candidate is one above F, and at least the server's TIME in µs (so tokens
-- keep increasing after F expires). Otherwise it returns {0, L's remaining
-- ms, age}.
if v and not mine then
  return {0, redis.call('PTTL', KEYS[1]), age}
end
redis.call('SET', KEYS[1], ARGV[1] .. '|0|' .. ARGV[3], 'PX', ARGV[2])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
return {1, string.format('%d', math.max(m + 1, now)), age}
