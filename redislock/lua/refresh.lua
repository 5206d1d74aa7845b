-- refresh.lua: KEYS K; ARGV owner, TTL ms, fence ("0": any), clock bound
-- ms. Returns 1 if extended, 0 if not held by owner (with that fence). An
-- exclusive holder's value is rewritten with its renewal counter raised
-- (GET and SET, as GET and PEXPIRE before), so that its stamp changes.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then return v end
local owner, ttl, fence, bound = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
if type(v) == 'table' then
  local e = redis.call('HGET', KEYS[1], owner)
  if not e then return 0 end
  local exp, f, rest = string.match(e, '^(%d+)|(%d+)(|.*)$')
  if not exp or (fence ~= '0' and f ~= fence) then return 0 end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(exp) + bound <= now then return 0 end
  redis.call('HSET', KEYS[1], owner, string.format('%.0f', now + ttl) .. '|' .. f .. rest)
  if redis.call('PTTL', KEYS[1]) < ttl + bound then redis.call('PEXPIRE', KEYS[1], ttl + bound) end
  return 1
end
if not v then return 0 end
local o, f, _, rn, pos = vparse(v)
if o ~= owner or (fence ~= '0' and f ~= tonumber(fence)) then return 0 end
redis.call('SET', KEYS[1], vpack(o, f, ttl, rn + 1) .. string.sub(v, pos), 'PX', ttl + bound)
return 1
