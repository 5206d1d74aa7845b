-- resume.lua: KEYS K; ARGV from owner, fence, to owner, TTL ms (the
-- lease's TTL plus its lock-delay), metadata, mode ("x" exclusive, "s"
-- shared, or a semaphore's limit), clock bound ms.
--
-- If the from owner holds K with that fence, in that mode, it moves the
-- hold to the to owner in place: the same fence, a lease of TTL from now,
-- the new metadata. An exclusive holder's value keeps what it recorded of
-- the queue (",qexp") and gets its renewal counter raised, so its stamp
-- changes; the queue itself names waiters only (a holder is never in it),
-- so a waiter is handed the name when the to owner releases it, as it
-- would have been by the from owner. A shared holder's or permit's hash
-- entry is renamed. Returns 1 when moved, 0 when the from owner does not
-- hold K with that fence, -1 when it holds it in another mode.
local K = KEYS[1]
local from, fence, to, ttl, meta, mode, bound = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
local v = redis.pcall('GET', K)
if type(v) == 'table' and string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then return v end
if type(v) == 'table' then
  local e = redis.call('HGET', K, from)
  if not e then return 0 end
  local exp, f = string.match(e, '^(%d+)|(%d+)|')
  if not exp or f ~= fence then return 0 end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(exp) + bound <= now then return 0 end
  if redis.call('HGET', K, 'm') ~= mode then return -1 end
  redis.call('HDEL', K, from)
  redis.call('HSET', K, to, string.format('%.0f', now + ttl) .. '|' .. f .. '|' .. meta)
  if redis.call('PTTL', K) < ttl + bound then redis.call('PEXPIRE', K, ttl + bound) end
  return 1
end
if not v then return 0 end
local o, f, _, rn, pos = vparse(v)
if o ~= from or f ~= tonumber(fence) then return 0 end
if mode ~= 'x' then return -1 end
local val = vpack(to, f, ttl, rn + 1)
local qexp = string.match(v, '^,(%d+)', pos)
if qexp then val = val .. ',' .. qexp end
if meta ~= '' then val = val .. '|' .. meta end
redis.call('SET', K, val, 'PX', ttl + bound)
return 1
