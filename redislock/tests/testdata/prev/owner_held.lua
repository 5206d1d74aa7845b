-- owner_held.lua, the release script's first part: it sets v to the reply
-- of GET on the key K (an error table when K is a hash) and held to whether
-- ARGV[1] holds K exclusively. Any other error of GET (NOPERM) is the
-- script's reply.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then return v end
local held = false
if type(v) == 'string' then
  local n = string.len(ARGV[1])
  held = string.sub(v, 1, n) == ARGV[1] and string.sub(v, n + 1, n + 1) == '|'
end
