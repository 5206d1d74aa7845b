package redislock

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Keys of one lock, all sharing the name's hash tag (see Key):
//
//	K  = Key(prefix, name)  owner|fence[|metadata] while held, |fence as a
//	                        tombstone after release
//	Q  = K + ":q"           list of waiting owners, first come first served
//	E  = K + ":e"           hash owner -> "ttl_ms|deadline_ms|metadata": a
//	                        waiter's lease length and how long its place is
//	                        kept unless it refreshes it (server clock)
//
// Owners never contain '|'. A lock freed while owners wait is handed to the
// first live one on the server, in the same script, with a lease of at most
// grantLease, and its Locker is told on the channel ARGV chanp .. <locker
// id> with payload owner|fence. The waiter then runs the acquire script,
// which finds it the owner and extends the lease to its own TTL.

// common holds the Lua helpers every script shares. The server's TIME is
// read only when needed: for the first token of a name whose tombstone is
// gone, and for queue deadlines when someone waits.
var common = `
local grant_ms = ` + strconv.FormatInt(grantLease.Milliseconds(), 10) + `
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fence_after(last)
  if last > 0 then return string.format('%.0f', last + 1) end
  return string.format('%.0f', now_us())
end
local function put(K, owner, fence, meta, ttl)
  local val = owner .. '|' .. fence
  if meta ~= '' then val = val .. '|' .. meta end
  redis.call('SET', K, val, 'PX', ttl)
end
local function next_live(Q, E)
  local nowms
  while true do
    local h = redis.call('LINDEX', Q, 0)
    if not h then return nil end
    nowms = nowms or math.floor(now_us() / 1000)
    local e = redis.call('HGET', E, h)
    if e then
      local ttl, dl, meta = string.match(e, '^(%d+)|(%d+)|(.*)$')
      if ttl and tonumber(dl) >= nowms then return h, ttl, meta end
    end
    redis.call('LPOP', Q)
    redis.call('HDEL', E, h)
  end
end
local function grant_next(K, Q, E, last, chanp)
  local h, ttl, meta = next_live(Q, E)
  if not h then return nil end
  redis.call('LPOP', Q)
  redis.call('HDEL', E, h)
  local f = fence_after(last)
  local lease = math.min(tonumber(ttl), grant_ms)
  put(K, h, f, meta, lease)
  redis.call('PUBLISH', chanp .. string.match(h, '^[^:]*'), h .. '|' .. f)
  return h, f, lease
end
local function free(K, Q, E, last, tomb, chanp)
  local h, f = grant_next(K, Q, E, last, chanp)
  if not h then
    redis.call('SET', K, '|' .. string.format('%.0f', last), 'PX', tomb)
  end
  return h, f
end
local function enqueue(Q, E, owner, ttl, meta, keep)
  local nowms = math.floor(now_us() / 1000)
  if redis.call('HSET', E, owner, ttl .. '|' .. (nowms + keep) .. '|' .. meta) == 1 then
    redis.call('RPUSH', Q, owner)
  end
  -- both keys must outlive this place (now + keep); doubling the margin
  -- when it runs short extends them once per keep, not on every call
  for _, k in ipairs({Q, E}) do
    if redis.call('PTTL', k) < keep then redis.call('PEXPIRE', k, 2 * keep) end
  end
end
`

// acquireScript: KEYS K, Q, E; ARGV owner, TTL ms, metadata, queue ("1"
// to join the queue if not acquired, "0" for a single attempt), keep ms
// (how long the queue keeps the place without a refresh), chanp.
//
// It returns {1, fence} when owner holds the lock (taken now, granted
// while it waited, or re-entered after a lost reply), with its lease set to
// TTL, and {0, ms} when not:
// the holder's remaining lease. A free lock goes to the first live waiter
// before anyone else; with queue set, owner is put in (or kept in) line.
var acquireScript = redis.NewScript(acquireFast + common + `
local K, Q, E = KEYS[1], KEYS[2], KEYS[3]
local owner, ttl, meta, queue, keep, chanp = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1', tonumber(ARGV[5]), ARGV[6]
local v = v0
local last = 0
if v then
  local o, f = string.match(v, '^([^|]*)|(%d+)')
  if not o then return redis.error_reply('dlock: key holds a value dlock did not write') end
  if o == owner then
    redis.call('PEXPIRE', K, ttl)
    return {1, f}
  end
  if o ~= '' then
    if queue then enqueue(Q, E, owner, ttl, meta, keep) end
    return {0, redis.call('PTTL', K)}
  end
  last = tonumber(f)
end
local h = next_live(Q, E)
if h and h ~= owner then
  local _, _, gttl = grant_next(K, Q, E, last, chanp)
  if queue then enqueue(Q, E, owner, ttl, meta, keep) end
  return {0, gttl}
end
if h then
  redis.call('LPOP', Q)
  redis.call('HDEL', E, owner)
end
local f = fence_after(last)
put(K, owner, f, meta, ttl)
return {1, f}
`)

// acquireFast takes a free lock nobody waits for with the fewest commands
// (GET, EXISTS, SET), before the helpers of the general case are even
// defined.
const acquireFast = `
local v0 = redis.call('GET', KEYS[1])
if (not v0 or string.byte(v0, 1) == 124) and redis.call('EXISTS', KEYS[2]) == 0 then
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

// ownerHeld sets v to the value of the key K and held to whether
// ARGV[1] holds it.
const ownerHeld = `
local v = redis.call('GET', KEYS[1])
local n = string.len(ARGV[1])
local held = v ~= false and string.sub(v, 1, n) == ARGV[1] and string.sub(v, n + 1, n + 1) == '|'
`

// refreshScript: KEYS K; ARGV owner, TTL ms. Returns 1 if extended, 0 if
// not held by owner.
var refreshScript = redis.NewScript(ownerHeld + `
if not held then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// releaseScript: KEYS K, Q, E; ARGV owner, tombstone ms, chanp. If owner
// holds the lock, frees it: hands it to the first live waiter, or leaves a
// tombstone keeping the fence. Otherwise takes owner out of the queue (a
// waiter giving up). Returns 0 if owner did not hold the lock, else {1}
// or, if it was handed on, {1, new owner, fence}.
//
// A holder is never in the queue: it leaves the queue in the same script
// that gives it the lock (grant_next, or the acquire script taking the
// lock as the first live waiter), and a holder's own acquire attempts
// re-enter instead of queueing. So only a waiter needs LREM and HDEL.
var releaseScript = redis.NewScript(ownerHeld + `
if redis.call('EXISTS', KEYS[2]) == 0 then
  if not held then return 0 end
  redis.call('SET', KEYS[1], '|' .. string.match(v, '^[^|]*|(%d+)'), 'PX', ARGV[2])
  return {1}
end
` + common + `
if not held then
  redis.call('LREM', KEYS[2], 1, ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  return 0
end
local h, f = free(KEYS[1], KEYS[2], KEYS[3], tonumber(string.match(v, '^[^|]*|(%d+)')), ARGV[2], ARGV[3])
if h then return {1, h, f} end
return {1}
`)

// forceReleaseScript: KEYS K, Q, E; ARGV tombstone ms, chanp. Frees the
// lock whatever its owner. Returns 1 if it was held.
var forceReleaseScript = redis.NewScript(common + `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) == '|' then return 0 end
local h = free(KEYS[1], KEYS[2], KEYS[3], tonumber(string.match(v, '^[^|]*|(%d+)')), ARGV[1], ARGV[2])
return 1
`)
