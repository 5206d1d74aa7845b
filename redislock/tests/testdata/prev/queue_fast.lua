-- queue_fast.lua, the acquire script's second part, after
-- acquire_fast.lua: the call of a waiter that joins the queue (ARGV queue
-- "1") for an exclusive hold of a name another owner holds exclusively
-- (the hot name's every call) returns here, before common.lua's helpers
-- are defined. It runs the commands and returns the reply that
-- acquire.lua's general path would for that case (GET, TIME, RPUSH,
-- PEXPIRE when the queue may need it, PTTL for the head of the queue);
-- every other case goes on to it. A value that does not record the
-- holder's TTL, or a takeover of this holder, is left to the general path.
if ARGV[7] == 'x' and ARGV[4] == '1' and type(v0) == 'string' then
  local o, f, ttl, rn, pos = string.match(v0, '^([^|]*)|(%d+)%.(%d+)%.?(%d*)()')
  local stamp = o and string.sub(v0, 1, pos - 1)
  if o and o ~= '' and o ~= ARGV[1] and tonumber(ttl) > 0 and ARGV[9] ~= stamp then
    local bound, qms = tonumber(ARGV[#ARGV]), {{queue_ms}}
    local t = redis.call('TIME')
    local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
    -- Strings are reused where they are what the general path would
    -- format (the Go caller sends decimal integers, and the scripts
    -- write times with '%.0f'): each number formatted costs a sprintf.
    local qxs = string.match(v0, '^,(%d+)', pos)
    local qx, extend = tonumber(qxs), false
    if not (qx and qx >= now + tonumber(ARGV[5]) and qx <= now + qms) then qxs, extend = string.format('%.0f', now + qms), true end
    local e = ARGV[1] .. '|' .. ARGV[8] .. '|' .. ARGV[2] .. '|' .. string.format('%.0f', now) .. '|' .. ARGV[5] .. '|' .. qxs .. '|x|' .. ARGV[3]
    local ahead = redis.call('RPUSH', KEYS[2], e) - 1
    if extend or ahead == 0 then redis.call('PEXPIRE', KEYS[2], qms) end
    local wait = 0
    if ahead == 0 then
      wait = redis.call('PTTL', KEYS[1])
      if wait > bound then wait = wait - bound end
    end
    return {0, wait, 1 + ahead, stamp, tonumber(ttl)}
  end
end
