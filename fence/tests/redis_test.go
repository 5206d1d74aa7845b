package fence_test

import (
	"testing"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testserver"
)

func TestRedis(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	s := fence.NewRedis(client)
	testStore(t, s, "")

	t.Run("ScriptFlushed", func(t *testing.T) {
		// The script is sent again after NOSCRIPT.
		mustWrite(t, s, "flushed", 1, "before")
		if err := client.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH = %v, want nil", err)
		}
		mustWrite(t, s, "flushed", 2, "after")
		wantStored(t, s, "flushed", 2, "after")
	})

	t.Run("NotAFencedValue", func(t *testing.T) {
		ctx := t.Context()
		client.Set(ctx, "string", "x", 0)
		client.HSet(ctx, "bad-fence", "fence", "12abc", "value", "v")
		client.HSet(ctx, "float-fence", "fence", "1e30", "value", "v")
		for _, key := range []string{"string", "bad-fence", "float-fence"} {
			wantForeign(t, s, key)
		}
		if got, _ := client.HGet(ctx, "bad-fence", "value").Result(); got != "v" {
			t.Errorf("HGET bad-fence value = %q after a refused write, want %q", got, "v")
		}
	})
}

func TestRedisCluster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 3)
	testStore(t, fence.NewRedis(c.Client(t)), "")
}
