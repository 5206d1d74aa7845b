-- fence_write stores ARGV[2] with token ARGV[1] in hash KEYS[1] unless the
-- stored token is higher (see Fence). It returns 1 if it wrote, or else
-- the stored token as a string. Both tokens are canonical decimals, so the
-- shorter is the smaller and equal lengths compare as strings.
local stored = redis.call('HGET', KEYS[1], 'fence')
if stored then
	if not string.match(stored, '^[1-9][0-9]*$') and stored ~= '0' then
		return redis.error_reply('field fence of ' .. KEYS[1] .. ' is not a token: ' .. stored)
	end
	local token = ARGV[1]
	if #stored > #token or (#stored == #token and stored > token) then
		return stored
	end
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1
