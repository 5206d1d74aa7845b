package redislock_test

import (
	"testing"

	"github.com/dlock-go/dlock/internal/fencerule/fencetest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

func TestFence(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	s := redislock.NewFence(client)
	fencetest.Run(t, s, "")

	t.Run("ScriptFlushed", func(t *testing.T) {
		// The script is sent again after NOSCRIPT.
		fencetest.MustWrite(t, s, "flushed", 1, "before")
		if err := client.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH = %v, want nil", err)
		}
		fencetest.MustWrite(t, s, "flushed", 2, "after")
		fencetest.WantStored(t, s, "flushed", 2, "after")
	})

	t.Run("NotAFencedValue", func(t *testing.T) {
		ctx := t.Context()
		client.Set(ctx, "string", "x", 0)
		client.HSet(ctx, "bad-fence", "fence", "12abc", "value", "v")
		client.HSet(ctx, "float-fence", "fence", "1e30", "value", "v")
		for _, key := range []string{"string", "bad-fence", "float-fence"} {
			fencetest.WantForeign(t, s, key)
		}
		if got, _ := client.HGet(ctx, "bad-fence", "value").Result(); got != "v" {
			t.Errorf("HGET bad-fence value = %q after a refused write, want %q", got, "v")
		}
	})
}

func TestFenceCluster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 3)
	fencetest.Run(t, redislock.NewFence(c.Client(t)), "")
}

// TestFenceWithoutClient checks that a Fence without a client refuses to
// work instead of panicking.
func TestFenceWithoutClient(t *testing.T) {
	fencetest.WantInvalid(t, redislock.NewFence(nil))
	fencetest.WantInvalid(t, &redislock.Fence{})
}
