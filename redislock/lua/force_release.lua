-- force_release.lua, after common.lua: KEYS K, Q; ARGV tombstone ms,
-- chanp, clock bound ms. Frees the name whatever its holders, handing it
-- to its waiters. Returns 1 if it was held.
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then return v end
local st = load(KEYS[1], v)
if not st or st.n == 0 then return 0 end
st.n, st.mode, st.owner, st.hs = 0, nil, nil, {}
grant(KEYS[1], KEYS[2], st, ARGV[2], '')
if st.n == 0 then tombstone(KEYS[1], st, ARGV[1]) end
return 1
