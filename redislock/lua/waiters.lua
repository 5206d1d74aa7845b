-- waiters.lua: KEYS Q. Returns how many of the name's queue entries are
-- live (their place's deadline, on the server's clock, not passed): dead
-- ones stay in the queue until they reach its head.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for _, e in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local w, keep = string.match(e, '^[^|]*|%d+|%d+|(%d+)|(%d+)|')
  if w and tonumber(w) + tonumber(keep) >= now then n = n + 1 end
end
return n
