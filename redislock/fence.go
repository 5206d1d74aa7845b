package redislock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule"
	"github.com/dlock-go/dlock/internal/goredis/luascript"
)

// fencePrefix starts the error messages of Fence.
const fencePrefix = "redislock: fence"

// Fence keeps fenced values in Redis (see package fence for the rule):
// each resource is one hash with the fields "fence" (the token, in
// decimal) and "value". One key holds both, so the key can be anything,
// on a single node, Sentinel or Cluster, without hash tags. It is safe for
// concurrent use. A Fence needs no Locker: the tokens may come from any
// dlock backend, as long as one lock guards the key.
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
type Fence struct {
	client redis.UniversalClient
}

// NewFence returns a Fence on client. A nil client gives a Fence whose
// every call returns an error wrapping dlock.ErrInvalid.
func NewFence(client redis.UniversalClient) *Fence {
	return &Fence{client: client}
}

// fenceWriteScript writes a fenced value (lua/fence_write.lua).
var fenceWriteScript = luascript.Must(luascript.New(lua, nil, "lua/fence_write.lua"))

// Write stores value for key if token is not below the token stored with
// it. A stale token is refused with an error wrapping fence.ErrStale and
// changes nothing.
func (f *Fence) Write(ctx context.Context, key string, token uint64, value []byte) error {
	if err := fencerule.CheckWrite(fencePrefix, key, token); err != nil {
		return err
	}
	if f.client == nil {
		return fmt.Errorf("%s: no client: %w", fencePrefix, dlock.ErrInvalid)
	}
	res, err := fenceWriteScript.Run(ctx, f.client, []string{key}, strconv.FormatUint(token, 10), value).Result()
	if err != nil {
		return fmt.Errorf("%s: write %q: %w", fencePrefix, key, err)
	}
	if s, ok := res.(string); ok {
		stored, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: write %q: stored token %q: %w", fencePrefix, key, s, err)
		}
		return fencerule.Stale(fencePrefix, key, token, stored)
	}
	return nil
}

// Read returns the value and token stored for key. A key never written
// reads as a nil value and token 0.
func (f *Fence) Read(ctx context.Context, key string) (value []byte, token uint64, err error) {
	if f.client == nil {
		return nil, 0, fmt.Errorf("%s: no client: %w", fencePrefix, dlock.ErrInvalid)
	}
	vals, err := f.client.HMGet(ctx, key, "fence", "value").Result()
	if err != nil {
		return nil, 0, fmt.Errorf("%s: read %q: %w", fencePrefix, key, err)
	}
	if vals[0] == nil {
		return nil, 0, nil
	}
	s, _ := vals[0].(string)
	if token, err = strconv.ParseUint(s, 10, 64); err != nil {
		return nil, 0, fmt.Errorf("%s: read %q: stored token %q: %w", fencePrefix, key, s, err)
	}
	v, _ := vals[1].(string)
	return []byte(v), token, nil
}
