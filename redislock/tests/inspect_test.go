package redislock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/internal/testhook"
)

// TestInspectHashTurnedString: Inspect reads a key whose GET said it was a
// hash (held shared or as a semaphore) with a second step; if the last
// holder left in between, the key is a string again (a tombstone, or a
// new exclusive holder) or gone, and that step must read it as such
// rather than fail with WRONGTYPE.
func TestInspectHashTurnedString(t *testing.T) {
	c := testserver.StartRedis(t).Client(t)
	ctx := t.Context()
	key := redislock.Key("", "turned")
	if err := c.Set(ctx, key, "own:1|42|host=a", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	vals, err := testhook.InspectHash(ctx, c, key)
	if err != nil {
		t.Fatalf("inspect script on a string key = %v, want its value", err)
	}
	if len(vals) != 3 || vals[1] != "own:1|42|host=a" {
		t.Fatalf("inspect script on a string key = %v, want {time, value, pttl}", vals)
	}
	c.Del(ctx, key)
	if vals, err := testhook.InspectHash(ctx, c, key); err != nil || len(vals) != 1 {
		t.Fatalf("inspect script on a missing key = %v, %v; want {time}", vals, err)
	}
}
