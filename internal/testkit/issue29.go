package testkit

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// WarnedBeforeDone waits up to limit for a value with Err set on ws,
// k's Warnings channel taken before the fault (Warnings reports only
// from its first call), then up to limit for k's Done, and returns when
// the warning was read and when Done closed. It fails the test if Done
// closes first (or with the warning still unread), or either wait runs
// out. A test calls it at once after the fault, so that the warning is
// read when it comes.
func WarnedBeforeDone(t testing.TB, k *dlock.Lock, ws <-chan dlock.Warning, limit time.Duration) (warned, done time.Time) {
	t.Helper()
	deadline := time.After(limit)
	for warned.IsZero() {
		select {
		case w, ok := <-ws:
			switch {
			case !ok:
				t.Fatalf("Warnings closed (Done closed) before any warning with an error")
			case w.Err == nil:
				continue
			}
			warned = time.Now()
			if IsClosed(k.Done()) {
				t.Fatalf("the warning (%v) came after Done closed", w.Err)
			}
		case <-deadline:
			t.Fatalf("no warning with an error within %v", limit)
		}
	}
	select {
	case <-k.Done():
		return warned, time.Now()
	case <-time.After(limit):
		t.Fatalf("Done still open %v after the warning", limit)
		return warned, time.Time{}
	}
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
