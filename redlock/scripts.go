package redlock

import "github.com/redis/go-redis/v9"

// The scripts run on each master alone. Keys: L, the lock (value
// "owner|fence|metadata", the owner being the lease's owner, '#' and the
// attempt's number (see attemptOwner), fence 0 while an acquisition is still writing
// its token back); F, the name's high-water mark (the highest token
// written back on this master, kept for markTTL); E, the master's epoch
// ("run_id:µs", see epoch below).

// epoch sets age to how long this master's data set has existed, in ms,
// by its own clock: E remembers the run id of the process that first
// wrote it and when; a restart (new run id, whatever the persistence) or
// a flush (E gone) starts a new epoch. It also sets now, in µs.
const epoch = `
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local born = nil
local e = redis.call('GET', KEYS[3])
if e then
  local r, b = string.match(e, '^(%x+):(%d+)$')
  if r == run then born = tonumber(b) end
end
if not born then
  born = now
  redis.call('SET', KEYS[3], run .. ':' .. string.format('%d', now))
end
local age = math.floor((now - born) / 1000)
`

// ownerHeld sets v to L's value, and mine to whether ARGV[1] holds L.
const ownerHeld = `
local v = redis.call('GET', KEYS[1])
local mine = v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|'
`

// raiseMark raises F to token tok (a string) if it is higher, and keeps F
// for ARGV mark seconds either way.
const raiseMark = `
local function raiseMark(tok, secs)
  local m = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tonumber(tok) > m then
    redis.call('SET', KEYS[2], tok, 'EX', secs)
  else
    redis.call('EXPIRE', KEYS[2], secs)
  end
end
`

// acquireScript: KEYS L, F, E; ARGV owner, TTL ms, metadata. If L is free
// or the owner's, it sets L to "owner|0|metadata" for TTL and returns
// {1, candidate token, age}: the candidate is one above F, and at least
// the server's TIME in µs (so tokens keep increasing after F expires).
// Otherwise it returns {0, L's remaining ms, age}.
var acquireScript = redis.NewScript(epoch + ownerHeld + `
if v and not mine then
  return {0, redis.call('PTTL', KEYS[1]), age}
end
redis.call('SET', KEYS[1], ARGV[1] .. '|0|' .. ARGV[3], 'PX', ARGV[2])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
return {1, string.format('%d', math.max(m + 1, now)), age}
`)

// fenceScript: KEYS L, F; ARGV owner, token, metadata, mark seconds. If
// the owner still holds L it writes the token into L (keeping L's expiry)
// and raises F to it, and returns 1; otherwise 0.
var fenceScript = redis.NewScript(ownerHeld + raiseMark + `
if not mine then return 0 end
local p = redis.call('PTTL', KEYS[1])
if p <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', p)
raiseMark(ARGV[2], ARGV[4])
return 1
`)

// refreshScript: KEYS L, F; ARGV owner, TTL ms, token, metadata, mark
// seconds. If the owner holds L with that token (or with any, when token
// is "0"), it extends L and returns 1; if the owner holds L with token 0
// (this master granted the acquisition, but the write-back of its token
// did not reach it), it writes the token into L and F, extends L and
// returns 1; if the owner holds L with another token, it returns 0. If L
// is gone (expired, or the master restarted empty) and token is not "0",
// it re-creates L with the token and raises F (returns 2); if another
// owner holds L it returns 0. The owner names one acquisition attempt
// (see attemptOwner), so L with the owner and token 0 is this grant.
var refreshScript = redis.NewScript(ownerHeld + raiseMark + `
if mine then
  local f = string.match(string.sub(v, #ARGV[1] + 2), '^(%d+)|')
  if ARGV[3] == '0' or f == ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
  end
  if f ~= '0' then return 0 end
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4], 'PX', ARGV[2])
  raiseMark(ARGV[3], ARGV[5])
  return 1
end
if v or ARGV[3] == '0' then return 0 end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3] .. '|' .. ARGV[4], 'PX', ARGV[2])
raiseMark(ARGV[3], ARGV[5])
return 2
`)

// releaseScript: KEYS L; ARGV owner, channel, message. If the owner holds
// L it deletes L, publishes message on channel and returns 1; otherwise 0.
var releaseScript = redis.NewScript(ownerHeld + `
if not mine then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`)

// releaseAnyScript is releaseScript for a key set by any attempt of the
// owner's acquisition: its value starts with ARGV owner .. '#'.
var releaseAnyScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. '#' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`)

// forceReleaseScript: KEYS L; ARGV channel. It deletes L whatever its
// owner, publishes a release on channel, and returns 1 if L was held.
var forceReleaseScript = redis.NewScript(`
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], 'r')
return 1
`)
