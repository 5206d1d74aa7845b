-- release.lua, after owner_held.lua, release_fast.lua and common.lua.
--
-- KEYS K, Q; ARGV owner, tombstone ms, chanp, clock bound ms. If owner
-- holds the name, frees its hold: hands the name on to the queue's head
-- entries that now fit, or, if nobody holds it any more, leaves a
-- tombstone keeping the fence. Otherwise takes owner out of the queue (a
-- waiter giving up), and hands the name to the entries that were queued
-- behind it and now fit (readers behind a writer that gave up). Returns 0
-- if owner did not hold the name, else {1, owner, fence, ticket, ...}
-- with the owners it was handed to (see grant).
--
-- A holder is never in the queue: it leaves the queue in the same script
-- that gives it the name, and a holder's own acquire attempts re-enter
-- instead of queueing. So only a waiter needs the queue searched.
local K, Q, owner = KEYS[1], KEYS[2], ARGV[1]
local st = load(K, v)
local res = {1}
if held then
  st.n, st.mode, st.owner = 0, nil, nil
elseif st and st.hs[owner] then
  redis.call('HDEL', K, owner)
  st.hs[owner] = nil
  st.n = st.n - 1
  if st.n == 0 then st.mode = nil end
else
  local e = find(Q, owner)
  if not e or not st then return 0 end
  redis.call('LREM', Q, 1, e)
  res = {0}
end
for _, x in ipairs(grant(K, Q, st, ARGV[3], '', first, string.match(owner, '^[^:]*'))) do table.insert(res, x) end
if res[1] == 0 then return 0 end
if st.n == 0 then tombstone(K, st, ARGV[2]) end
return res
