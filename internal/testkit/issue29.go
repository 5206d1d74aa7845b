package testkit

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// WarnedBeforeDone waits up to limit for a value with Err set on k's
// Warnings, then up to limit for k's Done, and returns how long before
// Done closed the warning came. It fails the test if Done closes first
// (or with the warning still unread), or either wait runs out.
func WarnedBeforeDone(t testing.TB, k *dlock.Lock, limit time.Duration) time.Duration {
	t.Helper()
	ws := k.Warnings()
	deadline := time.After(limit)
	var warned time.Time
	for warned.IsZero() {
		select {
		case w := <-ws:
			if w.Err != nil {
				warned = time.Now()
				if IsClosed(k.Done()) {
					t.Fatalf("the warning (%v) came after Done closed", w.Err)
				}
			}
		case <-k.Done():
			t.Fatalf("Done closed with no warning before it")
		case <-deadline:
			t.Fatalf("no warning within %v", limit)
		}
	}
	select {
	case <-k.Done():
	case <-time.After(limit):
		t.Fatalf("Done still open %v after the warning", limit)
	}
	return time.Since(warned)
}

// ResumeExtendCost resumes on b a lock on name that a holds, then
// extends it and releases it, twice (the first time loads what a store
// caches, such as scripts), and returns what count (a store's request
// counter for b) rose by during the second Resume and the second Extend.
func ResumeExtendCost(t testing.TB, a, b *dlock.Locker, name string, count func() int64) (resume, extend int64) {
	t.Helper()
	for range 2 {
		k := MustTryAcquire(t, a, name)
		before := count()
		rk, err := b.Resume(t.Context(), k.Token())
		if err != nil {
			t.Fatalf("Resume = %v", err)
		}
		resume = count() - before
		before = count()
		if err := rk.Extend(t.Context(), 5*time.Second); err != nil {
			t.Fatalf("Extend = %v", err)
		}
		extend = count() - before
		MustRelease(t, rk)
	}
	return resume, extend
}
