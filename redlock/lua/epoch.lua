-- epoch.lua, the acquire script's first part: KEYS[3] is E, the master's
-- epoch ("run_id:µs").
--
-- It sets age to how long this master's data set has existed, in ms, by
-- its own clock: E remembers the run id of the process that first wrote it
-- and when; a restart (new run id, whatever the persistence) or a flush (E
-- gone) starts a new epoch. It also sets now, in µs.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local born = nil
local e = redis.call('GET', KEYS[3])
if e then
  local r, b = string.match(e, '^(%x+):(%d+)$')
  if r == run then born = tonumber(b) end
end
if not born then
  born = now
  redis.call('SET', KEYS[3], run .. ':' .. string.format('%d', now))
end
local age = math.floor((now - born) / 1000)
