package etcdlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// The round trips of Resume and Extend, counted at the client (every lock
// unrenewed, so nothing else sends): Resume of a hold never put again is
// one transaction, of one resumed or extended before two; Extend is one
// transaction, plus a lease grant when the Locker has no session of the
// new TTL yet.
func TestRequestsPerResumeAndExtend(t *testing.T) {
	e := testserver.StartEtcd(t)
	counter := &sessionlocktest.RequestCounter{}
	cli := countingClient(t, e.Addr(), counter)
	a, b := newLocker(t, cli, nil), newLocker(t, cli, nil)
	name := "cost/" + t.Name()
	unrenewed := dlock.WithoutRenewal()
	// Sessions of the TTLs used below, on both Lockers.
	for _, l := range []*dlock.Locker{a, b} {
		for _, ttl := range []time.Duration{5 * time.Second, 7 * time.Second} {
			testkit.MustRelease(t, testkit.MustTryAcquire(t, l, name+"-warm", dlock.WithTTL(ttl), unrenewed))
		}
	}
	k := testkit.MustTryAcquire(t, a, name, dlock.WithTTL(5*time.Second), unrenewed)

	counted := func(what string, want int, step func()) {
		t.Helper()
		counter.Take()
		step()
		if n, by := counter.Take(); n != want {
			t.Errorf("%s: %d requests (%v), want %d", what, n, by, want)
		} else {
			t.Logf("%s: %d requests (%v)", what, n, by)
		}
	}
	var r *dlock.Lock
	counted("Resume of a fresh hold", 1, func() { r = mustResume(t, b, k.Token()) })
	counted("Resume of a resumed hold", 2, func() { r = mustResume(t, a, r.Token()) })
	counted("Extend to a TTL with a session", 1, func() { mustExtend(t, r, 7*time.Second) })
	counted("Extend to a TTL without one", 2, func() { mustExtend(t, r, 11*time.Second) })
	testkit.MustRelease(t, r)
}

func mustResume(t *testing.T, l *dlock.Locker, token string) *dlock.Lock {
	t.Helper()
	r, err := l.Resume(t.Context(), token, dlock.WithoutRenewal())
	if err != nil {
		t.Fatalf("Resume = %v", err)
	}
	return r
}

func mustExtend(t *testing.T, k *dlock.Lock, ttl time.Duration) {
	t.Helper()
	if err := k.Extend(t.Context(), ttl); err != nil {
		t.Fatalf("Extend(%v) = %v", ttl, err)
	}
}
