-- The baseline's release: delete KEYS[1] if it still holds the caller's
-- token ARGV[1]. Returns 1 if it deleted the key, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
