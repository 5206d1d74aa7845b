package redislock

import "github.com/redis/go-redis/v9"

// The lock key's value is owner|fence (or owner|fence|metadata) while
// held, and |fence as a tombstone after release. Owners never contain '|'.

// acquireScript: KEYS[1] lock key; ARGV[1] owner, ARGV[2] TTL in ms,
// ARGV[3] metadata (may be empty). Returns {1, fence} when held by
// ARGV[1] (taken now, or re-entered after a lost reply), else
// {0, remaining lease in ms}.
var acquireScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local last = 0
if v then
  local owner, fence = string.match(v, '^([^|]*)|(%d+)')
  if not owner then return redis.error_reply('dlock: key holds a value dlock did not write') end
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, fence}
  end
  if owner ~= '' then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  last = tonumber(fence)
end
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence <= last then fence = last + 1 end
fence = string.format('%.0f', fence)
local val = ARGV[1] .. '|' .. fence
if ARGV[3] ~= '' then val = val .. '|' .. ARGV[3] end
redis.call('SET', KEYS[1], val, 'PX', ARGV[2])
return {1, fence}
`)

// ownerMatches is shared by refresh and release: the key is held by
// ARGV[1]; v is its value.
const ownerMatches = `
local v = redis.call('GET', KEYS[1])
local n = string.len(ARGV[1])
if not v or string.sub(v, 1, n) ~= ARGV[1] or string.sub(v, n + 1, n + 1) ~= '|' then
  return 0
end
`

// refreshScript: KEYS[1] lock key; ARGV[1] owner, ARGV[2] TTL in ms.
// Returns 1 if extended, 0 if not held by ARGV[1].
var refreshScript = redis.NewScript(ownerMatches + `
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// freeKey replaces the held value v by its tombstone and wakes waiters on
// the channel in the last ARGV.
const freeKey = `
redis.call('SET', KEYS[1], '|' .. string.match(v, '^[^|]*|(%d+)'), 'PX', ARGV[#ARGV - 1])
redis.call('PUBLISH', ARGV[#ARGV], '')
return 1
`

// releaseScript: KEYS[1] lock key; ARGV[1] owner, ARGV[2] tombstone TTL
// in ms, ARGV[3] release channel. Returns 1 if released, 0 if not held by
// ARGV[1].
var releaseScript = redis.NewScript(ownerMatches + freeKey)

// forceReleaseScript: KEYS[1] lock key; ARGV[1] tombstone TTL in ms,
// ARGV[2] release channel. Frees the key whatever its owner. Returns 1 if
// it was held.
var forceReleaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) == '|' then return 0 end
` + freeKey)
