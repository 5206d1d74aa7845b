package redislock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// TestOutOfMemoryIsNoSpace attacks a Locker with a server over its
// maxmemory under the default noeviction policy, which refuses every
// write: Acquire's error must say the store is out of space (wrap
// dlock.ErrNoSpace, with the server's OOM message), not look like a
// network fault, and a lock taken before keeps being released.
func TestOutOfMemoryIsNoSpace(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := srv.Client(t)
	l, err := redislock.New(c, nil)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	held, err := l.Acquire(t.Context(), "before")
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", "before", err)
	}
	if err := c.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatalf("CONFIG SET maxmemory 1: %v", err)
	}
	t.Cleanup(func() { c.ConfigSet(t.Context(), "maxmemory", "0") })
	if _, err := l.TryAcquire(t.Context(), "full", dlock.WithTTL(time.Minute)); !errors.Is(err, dlock.ErrNoSpace) {
		t.Errorf("TryAcquire(%q) on a server over maxmemory = %v, want an error wrapping dlock.ErrNoSpace", "full", err)
	}
	// A script that has written once runs to its end whatever the memory
	// (Redis checks only its first write), so a shared hold or a permit
	// may be granted; if refused, the error must say why.
	for name, opt := range map[string]dlock.Option{"full-shared": dlock.Shared(), "full-permit": dlock.WithLimit(3)} {
		k, err := l.TryAcquire(t.Context(), name, opt)
		switch {
		case err == nil:
			k.Release(t.Context())
		case !errors.Is(err, dlock.ErrNoSpace):
			t.Errorf("TryAcquire(%q) on a server over maxmemory = %v, want success or an error wrapping dlock.ErrNoSpace", name, err)
		}
	}
	if err := held.Release(t.Context()); err != nil {
		t.Errorf("Release(%q) on a server over maxmemory = %v, want nil (deletes are allowed)", "before", err)
	}
}
