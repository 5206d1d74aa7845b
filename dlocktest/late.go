package dlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// testLateAcquireFreed attacks an acquisition whose caller gives up while
// its request is on its way to the store. The adversary is the client
// library, as pgx and gRPC behave: when the caller's context ends, the
// client returns at once, but the request it sent is not taken back, and
// the store runs it later. Here the request reaches the store only after
// the caller has given up and the holder has let go, so it takes the name
// for an owner that gave up, after the release the Locker sent when the
// step failed. The Locker must free the name within seconds (it releases
// again later, see releaseLater), not leave it held for the lease's 10
// minutes.
//
// The order is the test's, not the scheduler's: the late request runs
// after the Locker's first release of its owner has returned (a first
// release that ran between the request's statements would free the name
// it had just taken, as on MariaDB, whose acquire is an upsert and a
// read), and the second release waits until the late request has run (a
// machine slow enough to take the lateRelease second between the give-up
// and the delivery would otherwise test nothing).
func testLateAcquireFreed(t *testing.T, h Harness) {
	if h.LockerAndDriver == nil {
		t.Skip("Harness.LockerAndDriver is not set")
	}
	owner, d := h.LockerAndDriver(t)
	t.Cleanup(func() { owner.Close() })
	store := &lateStore{Driver: d, sent: make(chan struct{}), deliver: make(chan struct{}), took: make(chan lateOutcome, 1),
		released: make(chan struct{}), ran: make(chan struct{})}
	l := dlock.NewLocker(store, driver.LockerOptions{})
	t.Cleanup(func() { l.Close() })
	t.Cleanup(store.deliverOnce) // first, if the test ended early: a release may wait for the request
	holder, other := newLocker(t, h), newLocker(t, h)
	name := uniqueName(t, "")

	k := testkit.MustTryAcquire(t, holder, name)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		k, err := l.TryAcquire(ctx, name, dlock.WithTTL(10*time.Minute))
		if k != nil {
			err = errors.New("TryAcquire returned a lock before its request reached the store")
		}
		done <- err
	}()
	<-store.sent
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire whose context was cancelled with its request on the way = %v, want context.Canceled", err)
	}
	select { // the Locker's first release of the late request's owner
	case <-store.released:
	case <-time.After(time.Minute):
		t.Fatalf("the Locker did not release the owner of an Acquire step whose caller gave up (1m)")
	}
	testkit.MustRelease(t, k)
	store.deliverOnce() // the request reaches the store: the name is free
	if o := <-store.took; o.err != nil || !o.res.Acquired {
		t.Fatalf("the late request did not take the free name %q (%+v, %v), want it taken (the adversary did not happen)", name, o.res, o.err)
	}
	testkit.Eventually(t, "the name taken by the late request freed", func() bool {
		k, err := other.TryAcquire(t.Context(), name)
		if err != nil {
			return false
		}
		testkit.MustRelease(t, k)
		return true
	})
}

// lateStore is a driver whose Acquire, like a client library, returns when
// its context ends while the request it sent (sent) still runs on the
// store, when deliver closes. took receives that request's outcome. The
// first release of that request's owner closes released once it has
// returned; later ones wait until the request has run (ran). It closes
// nothing: the Locker that made the driver owns it.
type lateStore struct {
	driver.Driver
	once     sync.Once
	sent     chan struct{}
	deliver  chan struct{}
	took     chan lateOutcome
	released chan struct{}
	ran      chan struct{}

	delivered sync.Once
	mu        sync.Mutex
	owner     string // the late request's
	releases  int    // of owner, so far
}

type lateOutcome struct {
	res driver.Result
	err error
}

func (s *lateStore) Acquire(ctx context.Context, lease driver.Lease) (driver.Result, error) {
	type result struct {
		res driver.Result
		err error
	}
	answer := make(chan result, 1)
	first := false
	s.once.Do(func() {
		first = true
		s.mu.Lock()
		s.owner = lease.Owner
		s.mu.Unlock()
	})
	if !first { // only the first request is late
		return s.Driver.Acquire(ctx, lease)
	}
	go func() {
		<-s.deliver
		res, err := s.Driver.Acquire(context.WithoutCancel(ctx), lease)
		close(s.ran)
		s.took <- lateOutcome{res, err}
		answer <- result{res, err}
	}()
	close(s.sent)
	select {
	case r := <-answer:
		return r.res, r.err
	case <-ctx.Done():
		return driver.Result{}, ctx.Err()
	}
}

func (s *lateStore) deliverOnce() { s.delivered.Do(func() { close(s.deliver) }) }

func (s *lateStore) Release(ctx context.Context, lease driver.Lease) error {
	s.mu.Lock()
	mine := s.owner != "" && lease.Owner == s.owner
	n := s.releases
	if mine {
		s.releases++
	}
	s.mu.Unlock()
	if !mine {
		return s.Driver.Release(ctx, lease)
	}
	if n > 0 {
		<-s.ran
	}
	err := s.Driver.Release(ctx, lease)
	if n == 0 {
		close(s.released)
	}
	return err
}

func (s *lateStore) Close() error { return nil }
