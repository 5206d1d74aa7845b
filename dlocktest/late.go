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
// The order is the test's, not the scheduler's. The Locker releases the
// given-up owner at once (once or twice: at the give-up and when the step
// returns), then again lateRelease later. The late request runs only
// after the releases at once have had half a second to land (one that
// ran between the request's statements would free the name it had just
// taken, as on MariaDB, whose acquire is an upsert and a read); releases
// of that owner from half a second after the give-up on are held until
// the test has seen the late request hold the name, so that a machine
// slow enough to reach lateRelease before the delivery does not fail
// the test for the wrong reason, and a Locker without the later release
// fails it (nothing else frees the name).
func testLateAcquireFreed(t *testing.T, h Harness) {
	if h.LockerAndDriver == nil {
		t.Skip("Harness.LockerAndDriver is not set")
	}
	owner, d := h.LockerAndDriver(t)
	t.Cleanup(func() { owner.Close() })
	store := &lateStore{Driver: d, sent: make(chan struct{}), deliver: make(chan struct{}), took: make(chan lateOutcome, 1),
		free: make(chan struct{})}
	l := dlock.NewLocker(store, driver.LockerOptions{})
	t.Cleanup(func() { l.Close() })
	t.Cleanup(store.freeOnce)    // first, if the test ended early: a release may be held
	t.Cleanup(store.deliverOnce) // and the request may wait
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
	store.giveUp()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("TryAcquire whose context was cancelled with its request on the way = %v, want context.Canceled", err)
	}
	time.Sleep(time.Until(store.lateFrom())) // the releases at once land first
	testkit.MustRelease(t, k)
	store.deliverOnce() // the request reaches the store: the name is free
	if o := <-store.took; o.err != nil || !o.res.Acquired {
		t.Fatalf("the late request did not take the free name %q (%+v, %v), want it taken (the adversary did not happen)", name, o.res, o.err)
	}
	if k, err := other.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			testkit.MustRelease(t, k)
		}
		t.Fatalf("TryAcquire of the name the late request took = %v, want ErrNotAcquired (a release at once freed it: the adversary did not happen)", err)
	}
	store.freeOnce() // the later releases go on
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
// store, when deliver closes. took receives that request's outcome.
// Releases of that request's owner from lateGap after giveUp on wait
// until free closes. It closes nothing: the Locker that made the driver
// owns it.
type lateStore struct {
	driver.Driver
	once    sync.Once
	sent    chan struct{}
	deliver chan struct{}
	took    chan lateOutcome
	free    chan struct{}

	delivered, freed sync.Once
	mu               sync.Mutex
	owner            string    // the late request's
	gaveUp           time.Time // when its caller gave up
}

// lateGap is how long after the give-up a release of the late request's
// owner counts as a later one: the releases at once come within
// microseconds, lateRelease (1 s) after it the later one.
const lateGap = 500 * time.Millisecond

type lateOutcome struct {
	res driver.Result
	err error
}

func (s *lateStore) giveUp() {
	s.mu.Lock()
	s.gaveUp = time.Now()
	s.mu.Unlock()
}

func (s *lateStore) lateFrom() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gaveUp.Add(lateGap)
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
func (s *lateStore) freeOnce()    { s.freed.Do(func() { close(s.free) }) }

func (s *lateStore) Release(ctx context.Context, lease driver.Lease) error {
	s.mu.Lock()
	later := s.owner != "" && lease.Owner == s.owner && !s.gaveUp.IsZero() && time.Since(s.gaveUp) >= lateGap
	s.mu.Unlock()
	if later {
		<-s.free
	}
	return s.Driver.Release(ctx, lease)
}

func (s *lateStore) Close() error { return nil }
