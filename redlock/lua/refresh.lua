-- refresh.lua, after owner_held.lua and raise_mark.lua: KEYS L, F; ARGV
-- owner, TTL ms, token, metadata, mark seconds. If the owner holds L with
-- that token (or with any, when token is "0"), it extends L and returns 1;
-- if the owner holds L with token 0 (this master granted the acquisition,
-- but the write-back of its token did not reach it), it writes the token
-- into L and F, extends L and returns 1; if the owner holds L with another
-- token, it returns 0. If L is gone (expired, or the master restarted
-- empty) and token is not "0", it re-creates L with the token and raises F
-- (returns 2); if another owner holds L it returns 0. The owner names one
-- acquisition attempt (see attemptOwner), so L with the owner and token 0
-- is this grant.
if mine then
  local f = string.match(string.sub(v, #ARGV[1] + 2), '^(%d+)|')
  if ARGV[3] == '0' or f == ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
  end
  if f ~= '0' then return 0 end
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4], 'PX', ARGV[2])
  raiseMark(ARGV[3], ARGV[5])
  return 1
end
if v or ARGV[3] == '0' then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4], 'PX', ARGV[2])
raiseMark(ARGV[3], ARGV[5])
return 2
