-- acquire.lua, after acquire_fast.lua and common.lua.
--
-- KEYS K, Q; ARGV owner, TTL ms, metadata, queue ("0" for a single
-- attempt, "1" to join the queue if not acquired, "2" to keep the place
-- taken by an earlier call of the same wait), keep ms (how long the queue
-- keeps the place without a refresh), chanp, mode ("x" exclusive, "s"
-- shared, or a semaphore's limit), ticket (this call's number in its wait,
-- or "0": see grant), takeover (a stamp, or ""), clock bound ms.
--
-- It returns {1, fence} when owner holds the name (taken now, granted
-- while it waited, or re-entered after a lost reply), with its lease set
-- to TTL; {0, ms} when not: how long until a holder's lease ends at the
-- latest, and {0, ms, ahead} when owner joined the queue in this call,
-- with how many were ahead of it then (holders and queued entries, live
-- or not yet found dead); {0, ms, ahead or -1, stamp, ttl} when the
-- name is held exclusively by another owner whose stamp the caller may
-- observe: always when queue is set, else only when the holder's lease
-- ran out by the server's clock less than the bound ago ("in doubt";
-- ms is then the key's PTTL, until it ended more than the bound ago,
-- and otherwise the lease left, PTTL minus the bound). A takeover equal
-- to the holder's stamp frees the name as if the holder had released it
-- (handing it to the queue's head first). {-1, mode} when the name is held
-- (or handed to a waiter) in a mode that disagrees with owner's. Entries
-- queued first are served first; owner takes the name only when the queue
-- is empty (or it is granted from it); with queue set, owner is put in (or
-- kept in) line.
local K, Q = KEYS[1], KEYS[2]
local owner, ttl, meta, queue, keep, chanp, mode, ticket, takeover = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local st = load(K, v0)
if not st then return redis.error_reply('dlock: key holds a value dlock did not write') end
if st.owner == owner then
  renew(K, st, ttl)
  return {1, st.fence}
end
local mine = st.hs[owner]
if mine then
  redis.call('HSET', K, owner, num(now_ms() + ttl) .. '|' .. mine.fence .. '|' .. mine.meta)
  if redis.call('PTTL', K) < ttl + bound_ms then redis.call('PEXPIRE', K, ttl + bound_ms) end
  return {1, mine.fence}
end
-- stamp: the exclusive holder's, for the caller to observe (see the
-- reply above); a value that does not record the holder's TTL gets none.
local stamp, pttl
if st.mode == 'x' and st.ttl > 0 then
  if takeover ~= '' and takeover == st.stamp then
    st.n, st.mode, st.owner, st.fence = 0, nil, nil, nil
  else
    stamp = st.stamp
    if queue == '0' then
      pttl = redis.call('PTTL', K)
      if pttl > bound_ms then stamp = nil end
    end
  end
end
if not compatible(st, mode) then return {-1, st.mode} end
if st.n == 0 or st.mode ~= 'x' then
  grant(K, Q, st, chanp, owner)
  if st.owner == owner then return {1, st.fence} end
  if st.hs[owner] then return {1, st.hs[owner].fence} end
  if not compatible(st, mode) then return {-1, st.mode} end
  if fits(st, mode) and not peek(Q) then
    return {1, add(K, st, owner, mode, meta, ttl)}
  end
end
local ahead, place
if queue ~= '0' then ahead, place = enqueue(Q, st, owner, ticket, tonumber(ttl), tonumber(keep), mode, meta, queue == '2') end
local wait = grant_ms
if st.glease then
  wait = st.glease
elseif place and place > 0 then
  -- Not first in line: a grant or its own heartbeat wakes it. (The head
  -- waiter wakes when the holder's lease ends, and its call then takes the
  -- name if the holder died.)
  wait = 0
elseif st.mode == 'x' then
  wait = pttl or redis.call('PTTL', K)
  if wait > bound_ms then wait = wait - bound_ms end
elseif st.n > 0 then
  wait = st.minexp - now_ms()
  if wait <= 0 then wait = wait + bound_ms end
end
if stamp then return {0, wait, ahead and st.n + ahead or -1, stamp, st.ttl} end
if ahead then return {0, wait, st.n + ahead} end
return {0, wait}
