package redislock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func mustRelease(t *testing.T, k *dlock.Lock) {
	t.Helper()
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
	}
}

// mustTry takes name on l with TryAcquire or fails the test.
func mustTry(t *testing.T, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Lock {
	t.Helper()
	k, err := l.TryAcquire(t.Context(), name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want a lock", name, err)
	}
	return k
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 5s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// containsField reports whether a CLIENT LIST line has the field=value
// prefix f among its space-separated fields.
func containsField(line, f string) bool {
	for _, field := range strings.Fields(line) {
		if strings.HasPrefix(field, f) {
			return true
		}
	}
	return false
}
