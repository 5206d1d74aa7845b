-- raise_mark.lua defines raiseMark(tok, secs): it raises F to token tok (a
-- string) if it is higher, and keeps F for secs (ARGV mark seconds) either
-- way.
local function raiseMark(tok, secs)
  local m = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tonumber(tok) > m then
    redis.call('SET', KEYS[2], tok, 'EX', secs)
  else
    redis.call('EXPIRE', KEYS[2], secs)
  end
end
