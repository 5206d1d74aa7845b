local how = ARGV[1]
if how == 'error' then
  error('boom')
elseif how == 'call' then
  return redis.call('HGET', KEYS[1], 'f')
elseif how == 'nil' then
  return nil
end
return twice({{n}})
