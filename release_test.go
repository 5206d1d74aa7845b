package dlock_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/memlock"
)

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// TestFailedReleaseIsRetriedWithinTheLease attacks Release with what a
// store restart does to it: the first two release steps fail with a
// connection error, which the driver does not classify or classifies as
// transient. Release reports the failure, and the Locker frees the name
// in the background within a second, instead of leaving it held for the
// rest of its 30 s TTL (the soak run saw 2,311 such releases on
// PostgreSQL, each keeping its name until the lease ran out).
func TestFailedReleaseIsRetriedWithinTheLease(t *testing.T) {
	for _, tc := range []struct {
		kind string
		err  error
		new  func(*memlock.Store) (*dlock.Locker, *faultDriver)
	}{
		{"unclassified", errRefused, func(s *memlock.Store) (*dlock.Locker, *faultDriver) { return newFaulty(s, false) }},
		{"transient", errLinkReset, func(s *memlock.Store) (*dlock.Locker, *faultDriver) { return newClassifying(s, nil) }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memlock.NewStore()
				l, d := tc.new(store)
				defer l.Close()
				k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(30*time.Second))
				if err != nil {
					t.Fatalf("Acquire = %v", err)
				}
				d.mu.Lock()
				d.releaseErr = func(call int) error {
					if call <= 2 {
						return tc.err
					}
					return nil
				}
				d.mu.Unlock()
				err = k.Release(t.Context())
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "retried in the background") {
					t.Fatalf("Release on a store refusing connections = %v, want the store's error, saying it is retried", err)
				}
				time.Sleep(time.Second)
				if owner, _, _ := store.Holder("a"); owner != "" {
					t.Errorf("holder of %q a second after a failed Release = %q, want none (retried in the background)", "a", owner)
				}
				d.mu.Lock()
				calls := d.releaseCalls
				d.mu.Unlock()
				if calls != 3 {
					t.Errorf("release steps = %d, want 3 (two refused, one that freed the name)", calls)
				}
			})
		})
	}
}

// TestFailedReleaseRetriesStopWithTheLease attacks the retries with a
// store that never comes back: they stop once the lease could have run
// out by itself, and a Release whose lease another owner holds by then is
// never repeated (each try is owner-checked anyway).
func TestFailedReleaseRetriesStopWithTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), false)
		defer l.Close()
		const ttl = 3 * time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		d.mu.Lock()
		d.releaseErr = func(int) error { return errRefused }
		d.mu.Unlock()
		if err := k.Release(t.Context()); !errors.Is(err, errRefused) {
			t.Fatalf("Release on a store refusing connections = %v, want the store's error", err)
		}
		time.Sleep(ttl)
		synctest.Wait()
		d.mu.Lock()
		during := d.releaseCalls
		d.mu.Unlock()
		if during < 3 {
			t.Errorf("release steps within the %v lease = %d, want at least 3 (retries)", ttl, during)
		}
		time.Sleep(time.Minute)
		d.mu.Lock()
		after := d.releaseCalls
		d.mu.Unlock()
		if after != during {
			t.Errorf("release steps = %d a minute after the lease ended, want %d (no retry past the lease)", after, during)
		}
	})
}

// TestDeniedReleaseIsNotRetried: a store that refuses the step (a missing
// grant) or the write (a full disk) would refuse it again; Release
// reports it and tries no more. The refusal is an error wrapping ErrDenied
// from a driver without a Classifier, or the store's own error that the
// driver's Classify says is denied or no space: the Locker wraps
// ErrDenied or ErrNoSpace around it, keeping it in the chain.
func TestDeniedReleaseIsNotRetried(t *testing.T) {
	for _, tc := range []struct {
		err, want error
		new       func(*memlock.Store) (*dlock.Locker, *faultDriver)
	}{
		{dlock.ErrDenied, dlock.ErrDenied, func(s *memlock.Store) (*dlock.Locker, *faultDriver) { return newFaulty(s, false) }},
		{errNoPerm, dlock.ErrDenied, func(s *memlock.Store) (*dlock.Locker, *faultDriver) { return newClassifying(s, nil) }},
		{errFull, dlock.ErrNoSpace, func(s *memlock.Store) (*dlock.Locker, *faultDriver) { return newClassifying(s, nil) }},
	} {
		synctest.Test(t, func(t *testing.T) {
			l, d := tc.new(memlock.NewStore())
			defer l.Close()
			k, err := l.Acquire(t.Context(), "a")
			if err != nil {
				t.Fatalf("Acquire = %v", err)
			}
			d.mu.Lock()
			d.releaseErr = func(int) error { return tc.err }
			d.mu.Unlock()
			if err := k.Release(t.Context()); !errors.Is(err, tc.want) || !errors.Is(err, tc.err) || strings.Contains(err.Error(), "retried") {
				t.Fatalf("Release refused by the store with %v = %v, want %v, not retried", tc.err, err, tc.want)
			}
			time.Sleep(10 * time.Second)
			d.mu.Lock()
			calls := d.releaseCalls
			d.mu.Unlock()
			if calls != 1 {
				t.Errorf("release steps after a refusal (%v) = %d, want 1", tc.err, calls)
			}
		})
	}
}
