-- acquire_fast.lua, the acquire script's first part: it takes a free name
-- nobody waits for, exclusively, with the fewest commands (GET, EXISTS,
-- TIME, SET), before the helpers of the general case (common.lua) are
-- even defined. GET fails on a hash (a name held in shared mode or as a
-- semaphore); pcall keeps that error as v0 for the general case. Any
-- other error (NOPERM: a user without GET) is the script's reply.
local v0 = redis.pcall('GET', KEYS[1])
if type(v0) == 'table' and string.sub(v0.err or '', 1, 9) ~= 'WRONGTYPE' then return v0 end
if ARGV[7] == 'x' and type(v0) ~= 'table' and (not v0 or string.byte(v0, 1) == 124) and redis.call('EXISTS', KEYS[2]) == 0 then
  local last = v0 and tonumber(string.sub(v0, 2)) or 0
  local t = redis.call('TIME')
  local f = string.format('%.0f', math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
  local val = ARGV[1] .. '|' .. f .. '.' .. ARGV[2] .. '.0'
  if ARGV[3] ~= '' then val = val .. '|' .. ARGV[3] end
  redis.call('SET', KEYS[1], val, 'PX', tonumber(ARGV[2]) + tonumber(ARGV[#ARGV]))
  return {1, f}
end
