package fence

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// Redis keeps fenced values in Redis: each resource is one hash with the
// fields "fence" (the token, in decimal) and "value". One key holds both,
// so the key can be anything, on a single node, Sentinel or Cluster,
// without hash tags. It is safe for concurrent use.
//
// Write runs one Lua script (EVALSHA, loaded again after NOSCRIPT) that
// compares the token with the stored one and writes both fields, so no
// other command runs in between. Tokens are compared as decimal strings,
// exactly, not as Lua numbers, which lose precision above 2^53.
//
// The key has no expiry. A key that Redis evicts, or loses with a restart
// without persistence, or that fails over to a replica that had not yet
// received it (replication is asynchronous), accepts any token again: keep
// fenced data on a server with persistence and maxmemory-policy
// noeviction.
type Redis struct {
	client redis.UniversalClient
}

// NewRedis returns a Redis on client.
func NewRedis(client redis.UniversalClient) *Redis {
	return &Redis{client: client}
}

// writeScript stores ARGV[2] with token ARGV[1] in hash KEYS[1] unless the
// stored token is higher. It returns 1 if it wrote, or else the stored
// token as a string. Both tokens are canonical decimals, so the shorter is
// the smaller and equal lengths compare as strings.
var writeScript = redis.NewScript(`
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
`)

// Write stores value for key if token is not below the token stored with
// it. A stale token is refused with an error wrapping ErrStale and
// changes nothing.
func (r *Redis) Write(ctx context.Context, key string, token uint64, value []byte) error {
	if err := checkWrite(key, token); err != nil {
		return err
	}
	if r.client == nil {
		return fmt.Errorf("fence: Redis without a client: %w", dlock.ErrInvalid)
	}
	res, err := writeScript.Run(ctx, r.client, []string{key}, strconv.FormatUint(token, 10), value).Result()
	if err != nil {
		return fmt.Errorf("fence: write %q: %w", key, err)
	}
	if s, ok := res.(string); ok {
		stored, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("fence: write %q: stored token %q: %w", key, s, err)
		}
		return stale(key, token, stored)
	}
	return nil
}

// Read returns the value and token stored for key. A key never written
// reads as a nil value and token 0.
func (r *Redis) Read(ctx context.Context, key string) (value []byte, token uint64, err error) {
	if r.client == nil {
		return nil, 0, fmt.Errorf("fence: Redis without a client: %w", dlock.ErrInvalid)
	}
	vals, err := r.client.HMGet(ctx, key, "fence", "value").Result()
	if err != nil {
		return nil, 0, fmt.Errorf("fence: read %q: %w", key, err)
	}
	if vals[0] == nil {
		return nil, 0, nil
	}
	s, _ := vals[0].(string)
	if token, err = strconv.ParseUint(s, 10, 64); err != nil {
		return nil, 0, fmt.Errorf("fence: read %q: stored token %q: %w", key, s, err)
	}
	v, _ := vals[1].(string)
	return []byte(v), token, nil
}
