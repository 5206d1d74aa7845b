package fence_test

import (
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
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
			err := s.Write(ctx, key, 5, []byte("new"))
			if err == nil || errors.Is(err, fence.ErrStale) {
				t.Errorf("Write(%q) over a value not written by Redis.Write = %v, want an error that is not ErrStale", key, err)
			}
			if _, _, err := s.Read(ctx, key); err == nil {
				t.Errorf("Read(%q) = nil error, want an error", key)
			}
		}
		if got, _ := client.HGet(ctx, "bad-fence", "value").Result(); got != "v" {
			t.Errorf("HGET bad-fence value = %q after a refused write, want %q", got, "v")
		}
	})

	t.Run("NilClient", func(t *testing.T) {
		var nilRedis fence.Redis
		if err := nilRedis.Write(t.Context(), "x", 1, nil); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Write on a zero Redis = %v, want ErrInvalid", err)
		}
	})
}

func TestRedisCluster(t *testing.T) {
	c := testserver.StartRedisCluster(t, 3)
	testStore(t, fence.NewRedis(c.Client(t)), "")
}
