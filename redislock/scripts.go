package redislock

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Keys of one name, all sharing the name's hash tag (see Key):
//
//	K  = Key(prefix, name)  a string while the name is free or held
//	                        exclusively: owner|fence[|metadata] while held,
//	                        |fence as a tombstone after release; a hash
//	                        while it is held in shared mode or as a
//	                        semaphore: owner -> "expiry_ms|fence|metadata"
//	                        per holder (expiry on the server's clock), plus
//	                        "f" -> the last fence issued and "m" -> the
//	                        mode ("s" shared, or the semaphore's limit)
//	Q  = K + ":q"           list of waiting owners, first come first served
//	E  = K + ":e"           hash owner -> "ttl_ms|deadline_ms|mode|metadata":
//	                        a waiter's lease length, how long its place is
//	                        kept unless it refreshes it (server clock), and
//	                        its mode ("x" exclusive, "s" shared, or a limit)
//
// Owners never contain '|' and always contain ':', so no owner is "f" or
// "m". The hash's own expiry is raised to its latest holder's, so a hash
// whose holders all expired disappears like an expired string; when its
// last holder leaves it becomes the tombstone |fence, so tokens keep
// increasing whatever mode the name is taken in next.
//
// The exclusive scripts read K with redis.pcall('GET'): on a hash that
// fails with WRONGTYPE, which sends them to the multi-holder logic, so a
// name never used in shared or semaphore mode runs exactly the commands
// it ran before those modes existed.
//
// A name freed (wholly or in part) while owners wait is handed on the
// server, in the same script, to as many queue entries from the head as
// fit: one exclusive entry when nobody holds, every shared entry up to
// the first exclusive one while no exclusive holder holds, permits while
// fewer than the limit hold. Each gets a lease of at most grantLease, and
// its Locker is told on the channel ARGV chanp .. <locker id> with payload
// owner|fence. The waiter then runs the acquire script, which finds it a
// holder and extends the lease to its own TTL.

// common holds the Lua helpers the general paths share. The server's TIME
// is read only when needed (and once per script): for the first token of
// a name whose tombstone is gone, for the expiries of shared holds and
// permits, and for queue deadlines when someone waits.
//
// A name's state is a table st: last (the last fence issued), n (live
// holders), mode ("x" for an exclusive holder, "s" shared, a limit, nil
// when n is 0), owner and fence (the exclusive holder), hs (the other
// holders by owner: exp, fence, metadata), minexp (their earliest
// expiry), glease (the shortest lease granted by this script).
var common = `
local grant_ms = ` + strconv.FormatInt(grantLease.Milliseconds(), 10) + `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local now_cache
local function now_ms()
  if not now_cache then now_cache = math.floor(now_us() / 1000) end
  return now_cache
end
local function num(x) return string.format('%.0f', x) end
local function fence_after(last)
  if last > 0 then return num(last + 1) end
  return num(now_us())
end
local function put(K, owner, fence, meta, ttl)
  local val = owner .. '|' .. fence
  if meta ~= '' then val = val .. '|' .. meta end
  redis.call('SET', K, val, 'PX', ttl)
end
-- load returns the state of K, whose GET (through pcall) returned v, or
-- nil if K holds a value dlock did not write. It drops expired holders.
local function load(K, v)
  local st = {last = 0, n = 0, hs = {}}
  if type(v) == 'table' then
    local now = now_ms()
    local all = redis.call('HGETALL', K)
    for i = 1, #all, 2 do
      local k, val = all[i], all[i + 1]
      if k == 'f' then
        st.last = tonumber(val)
      elseif k == 'm' then
        st.mode = val
      else
        local exp, f, meta = string.match(val, '^(%d+)|(%d+)|(.*)$')
        exp = tonumber(exp)
        if exp and exp > now then
          st.hs[k] = {exp = exp, fence = f, meta = meta}
          st.n = st.n + 1
          if not st.minexp or exp < st.minexp then st.minexp = exp end
        else
          redis.call('HDEL', K, k)
        end
      end
    end
    if st.n == 0 then st.mode = nil end
  elseif v then
    local o, f = string.match(v, '^([^|]*)|(%d+)')
    if not o then return nil end
    st.last = tonumber(f)
    if o ~= '' then st.n, st.mode, st.owner, st.fence = 1, 'x', o, f end
  end
  return st
end
-- kind is what modes must agree on: "L" for a lock, else the limit.
local function kind(mode)
  if mode == 'x' or mode == 's' then return 'L' end
  return mode
end
local function compatible(st, mode) return st.n == 0 or kind(st.mode) == kind(mode) end
-- fits reports whether the holders leave room for one more of mode.
local function fits(st, mode)
  if st.n == 0 then return true end
  if mode == 'x' or st.mode == 'x' then return false end
  if mode == 's' then return st.mode == 's' end
  return st.mode == mode and st.n < tonumber(mode)
end
-- add makes owner a holder of mode with a lease of ms and returns its
-- fence, above every earlier one.
local function add(K, st, owner, mode, meta, ms)
  local f = fence_after(st.last)
  st.last = tonumber(f)
  if mode == 'x' then
    put(K, owner, f, meta, ms)
    st.owner, st.fence = owner, f
  else
    if st.n == 0 then redis.call('DEL', K) end
    local exp = now_ms() + ms
    redis.call('HSET', K, owner, num(exp) .. '|' .. f .. '|' .. meta, 'f', f, 'm', mode)
    if redis.call('PTTL', K) < ms then redis.call('PEXPIRE', K, ms) end
    st.hs[owner] = {exp = exp, fence = f, meta = meta}
    if not st.minexp or exp < st.minexp then st.minexp = exp end
  end
  st.n, st.mode = st.n + 1, mode
  return f
end
local function tombstone(K, st, ms)
  redis.call('SET', K, '|' .. num(st.last), 'PX', ms)
end
local function next_live(Q, E)
  while true do
    local h = redis.call('LINDEX', Q, 0)
    if not h then return nil end
    local e = redis.call('HGET', E, h)
    if e then
      local ttl, dl, mode, meta = string.match(e, '^(%d+)|(%d+)|([^|]*)|(.*)$')
      if ttl and tonumber(dl) >= now_ms() then return h, ttl, mode, meta end
    end
    redis.call('LPOP', Q)
    redis.call('HDEL', E, h)
  end
end
-- grant hands the name to the queue's head entries while they fit, in
-- order, and returns {owner, fence, ...} of those it granted. Self (the
-- owner running the script) gets its own TTL and no message; the others
-- a lease of at most grant_ms and a message on their Locker's channel.
local function grant(K, Q, E, st, chanp, self)
  local granted = {}
  while not (st.n > 0 and st.mode == 'x') do
    local h, ttl, mode, meta = next_live(Q, E)
    if not h or not compatible(st, mode) or not fits(st, mode) then break end
    redis.call('LPOP', Q)
    redis.call('HDEL', E, h)
    local lease = tonumber(ttl)
    if h ~= self then lease = math.min(lease, grant_ms) end
    local f = add(K, st, h, mode, meta, lease)
    if h ~= self then
      redis.call('PUBLISH', chanp .. string.match(h, '^[^:]*'), h .. '|' .. f)
      st.glease = math.min(st.glease or lease, lease)
    end
    table.insert(granted, h)
    table.insert(granted, f)
  end
  return granted
end
-- enqueue puts owner at the tail of the queue, or refreshes its place;
-- it returns how many entries are queued ahead of it if it joined now,
-- else nil.
local function enqueue(Q, E, owner, ttl, mode, meta, keep)
  local ahead
  if redis.call('HSET', E, owner, ttl .. '|' .. num(now_ms() + keep) .. '|' .. mode .. '|' .. meta) == 1 then
    ahead = redis.call('RPUSH', Q, owner) - 1
  end
  -- both keys must outlive this place (now + keep); doubling the margin
  -- when it runs short extends them once per keep, not on every call
  for _, k in ipairs({Q, E}) do
    if redis.call('PTTL', k) < keep then redis.call('PEXPIRE', k, 2 * keep) end
  end
  return ahead
end
`

// acquireScript: KEYS K, Q, E; ARGV owner, TTL ms, metadata, queue ("1"
// to join the queue if not acquired, "0" for a single attempt), keep ms
// (how long the queue keeps the place without a refresh), chanp, mode
// ("x" exclusive, "s" shared, or a semaphore's limit).
//
// It returns {1, fence} when owner holds the name (taken now, granted
// while it waited, or re-entered after a lost reply), with its lease set
// to TTL; {0, ms} when not: how long until a holder's lease ends at the
// latest, and {0, ms, ahead} when owner joined the queue in this call,
// with how many were ahead of it then (holders and queued entries, live
// or not yet found dead); {-1, mode} when the name is held (or handed to a waiter) in a
// mode that disagrees with owner's. Entries queued first are served
// first; owner takes the name only when the queue is empty (or it is
// granted from it); with queue set, owner is put in (or kept in) line.
var acquireScript = redis.NewScript(acquireFast + common + `
local K, Q, E = KEYS[1], KEYS[2], KEYS[3]
local owner, ttl, meta, queue, keep, chanp, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1', tonumber(ARGV[5]), ARGV[6], ARGV[7]
local st = load(K, v0)
if not st then return redis.error_reply('dlock: key holds a value dlock did not write') end
if st.owner == owner then
  redis.call('PEXPIRE', K, ttl)
  return {1, st.fence}
end
local mine = st.hs[owner]
if mine then
  redis.call('HSET', K, owner, num(now_ms() + ttl) .. '|' .. mine.fence .. '|' .. mine.meta)
  if redis.call('PTTL', K) < ttl then redis.call('PEXPIRE', K, ttl) end
  return {1, mine.fence}
end
if not compatible(st, mode) then return {-1, st.mode} end
grant(K, Q, E, st, chanp, owner)
if st.owner == owner then return {1, st.fence} end
if st.hs[owner] then return {1, st.hs[owner].fence} end
if not compatible(st, mode) then return {-1, st.mode} end
if fits(st, mode) and not next_live(Q, E) then
  return {1, add(K, st, owner, mode, meta, ttl)}
end
local ahead
if queue then ahead = enqueue(Q, E, owner, ttl, mode, meta, keep) end
local wait = grant_ms
if st.glease then
  wait = st.glease
elseif st.mode == 'x' then
  wait = redis.call('PTTL', K)
elseif st.n > 0 then
  wait = st.minexp - now_ms()
end
if ahead then return {0, wait, st.n + ahead} end
return {0, wait}
`)

// acquireFast takes a free name nobody waits for, exclusively, with the
// fewest commands (GET, EXISTS, SET), before the helpers of the general
// case are even defined. GET fails on a hash (a name held in shared mode
// or as a semaphore); pcall keeps that error as v0 for the general case.
const acquireFast = `
local v0 = redis.pcall('GET', KEYS[1])
if ARGV[7] == 'x' and type(v0) ~= 'table' and (not v0 or string.byte(v0, 1) == 124) and redis.call('EXISTS', KEYS[2]) == 0 then
  local last = v0 and tonumber(string.sub(v0, 2)) or 0
  local f
  if last > 0 then
    f = string.format('%.0f', last + 1)
  else
    local t = redis.call('TIME')
    f = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  end
  local val = ARGV[1] .. '|' .. f
  if ARGV[3] ~= '' then val = val .. '|' .. ARGV[3] end
  redis.call('SET', KEYS[1], val, 'PX', ARGV[2])
  return {1, f}
end
`

// ownerHeld sets v to the reply of GET on the key K (an error table when
// K is a hash) and held to whether ARGV[1] holds K exclusively.
const ownerHeld = `
local v = redis.pcall('GET', KEYS[1])
local held = false
if type(v) == 'string' then
  local n = string.len(ARGV[1])
  held = string.sub(v, 1, n) == ARGV[1] and string.sub(v, n + 1, n + 1) == '|'
end
`

// refreshScript: KEYS K; ARGV owner, TTL ms. Returns 1 if extended, 0 if
// not held by owner.
var refreshScript = redis.NewScript(ownerHeld + `
if type(v) == 'table' then
  local e = redis.call('HGET', KEYS[1], ARGV[1])
  if not e then return 0 end
  local exp, rest = string.match(e, '^(%d+)(|.*)$')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if not exp or tonumber(exp) <= now then return 0 end
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now + tonumber(ARGV[2])) .. rest)
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  return 1
end
if not held then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript: KEYS K, Q, E; ARGV owner, tombstone ms, chanp. If owner
// holds the name, frees its hold: hands the name on to the queue's head
// entries that now fit, or, if nobody holds it any more, leaves a
// tombstone keeping the fence. Otherwise takes owner out of the queue (a
// waiter giving up), and hands the name to the entries that were queued
// behind it and now fit (readers behind a writer that gave up). Returns 0
// if owner did not hold the name, else {1, owner, fence, ...} with the
// owners it was handed to.
//
// A holder is never in the queue: it leaves the queue in the same script
// that gives it the name, and a holder's own acquire attempts re-enter
// instead of queueing. So only a waiter needs LREM and HDEL.
var releaseScript = redis.NewScript(ownerHeld + `
if type(v) ~= 'table' and redis.call('EXISTS', KEYS[2]) == 0 then
  if not held then return 0 end
  redis.call('SET', KEYS[1], '|' .. string.match(v, '^[^|]*|(%d+)'), 'PX', ARGV[2])
  return {1}
end
` + common + `
local K, Q, E, owner = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
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
  local left = redis.call('LREM', Q, 1, owner)
  redis.call('HDEL', E, owner)
  if left == 0 or not st then return 0 end
  res = {0}
end
for _, x in ipairs(grant(K, Q, E, st, ARGV[3], '')) do table.insert(res, x) end
if res[1] == 0 then return 0 end
if st.n == 0 then tombstone(K, st, ARGV[2]) end
return res
`)

// forceReleaseScript: KEYS K, Q, E; ARGV tombstone ms, chanp. Frees the
// name whatever its holders, handing it to its waiters. Returns 1 if it
// was held.
var forceReleaseScript = redis.NewScript(common + `
local st = load(KEYS[1], redis.pcall('GET', KEYS[1]))
if not st or st.n == 0 then return 0 end
st.n, st.mode, st.owner, st.hs = 0, nil, nil, {}
grant(KEYS[1], KEYS[2], KEYS[3], st, ARGV[2], '')
if st.n == 0 then tombstone(KEYS[1], st, ARGV[1]) end
return 1
`)

// inspectHashScript: KEYS K, found to be a hash. Returns the server's
// time in ms and the hash's fields and values, for Inspect to drop expired
// holders; or, if the key has become a string since (the last holder
// left: a tombstone, or an exclusive holder's value), {time, value, PTTL};
// or {time} if it is gone.
var inspectHashScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ty = redis.call('TYPE', KEYS[1]).ok
if ty == 'hash' then return {now, redis.call('HGETALL', KEYS[1])} end
if ty == 'string' then return {now, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])} end
return {now}
`)

// waitersScript: KEYS E. Returns how many of the name's queue entries
// are live (their place's deadline, on the server's clock, not passed):
// dead ones stay in the queue until they reach its head.
var waitersScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for _, e in ipairs(redis.call('HVALS', KEYS[1])) do
  local dl = string.match(e, '^%d+|(%d+)|')
  if dl and tonumber(dl) >= now then n = n + 1 end
end
return n
`)
