package redislock

import "github.com/redis/go-redis/v9"

// The lock key's value is owner.."|"..fence while held and "|"..fence as a
// tombstone after release. Owners never contain '|'.

// acquireScript: KEYS[1] lock key; ARGV[1] owner, ARGV[2] TTL in ms.
// Returns {1, fence} when held by ARGV[1] (taken now, or re-entered after a
// lost reply), else {0, remaining lease in ms}.
var acquireScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local last = 0
if v then
  local sep = string.find(v, '|', 1, true)
  if not sep then return redis.error_reply('dlock: key holds a value dlock did not write') end
  local owner = string.sub(v, 1, sep - 1)
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, string.sub(v, sep + 1)}
  end
  if owner ~= '' then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  last = tonumber(string.sub(v, sep + 1)) or 0
end
local t = redis.call('TIME')
local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
if fence <= last then fence = last + 1 end
fence = string.format('%.0f', fence)
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', ARGV[2])
return {1, fence}
`)

// ownerMatches is shared by refresh and release: v's owner is ARGV[1].
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

// releaseScript: KEYS[1] lock key; ARGV[1] owner, ARGV[2] tombstone TTL
// in ms, ARGV[3] release channel. Returns 1 if released, 0 if not held by
// ARGV[1].
var releaseScript = redis.NewScript(ownerMatches + `
redis.call('SET', KEYS[1], string.sub(v, n + 1), 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], '')
return 1
`)
