-- release_fast.lua, the release script's second part, after
-- owner_held.lua: an exclusive holder's release pops the queue's head at
-- once: nil means nobody waits, and costs what EXISTS would; then it
-- leaves the tombstone and returns without the helpers of common.lua. A
-- caller that holds nothing and has no queue to leave returns 0 here too.
local first
if type(v) ~= 'table' and held then
  first = redis.call('LPOP', KEYS[2])
  if not first then
    local _, f = vparse(v)
    redis.call('SET', KEYS[1], '|' .. string.format('%.0f', f), 'PX', ARGV[2])
    return {1}
  end
elseif type(v) ~= 'table' and redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
