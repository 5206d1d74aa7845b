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
func testLateAcquireFreed(t *testing.T, h Harness) {
	if h.LockerAndDriver == nil {
		t.Skip("Harness.LockerAndDriver is not set")
	}
	owner, d := h.LockerAndDriver(t)
	t.Cleanup(func() { owner.Close() })
	store := &lateStore{Driver: d, sent: make(chan struct{}), deliver: make(chan struct{}), took: make(chan bool, 1)}
	l := dlock.NewLocker(store, driver.LockerOptions{})
	t.Cleanup(func() { l.Close() })
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
	testkit.MustRelease(t, k)
	close(store.deliver) // the request reaches the store: the name is free
	if !<-store.took {
		t.Fatalf("the late request did not take the free name %q, want it taken (the adversary did not happen)", name)
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
// store, when deliver closes. took receives whether that request took the
// name. It closes nothing: the Locker that made the driver owns it.
type lateStore struct {
	driver.Driver
	once    sync.Once
	sent    chan struct{}
	deliver chan struct{}
	took    chan bool
}

func (s *lateStore) Acquire(ctx context.Context, lease driver.Lease) (driver.Result, error) {
	type result struct {
		res driver.Result
		err error
	}
	answer := make(chan result, 1)
	go func() {
		<-s.deliver
		res, err := s.Driver.Acquire(context.WithoutCancel(ctx), lease)
		s.took <- err == nil && res.Acquired
		answer <- result{res, err}
	}()
	s.once.Do(func() { close(s.sent) })
	select {
	case r := <-answer:
		return r.res, r.err
	case <-ctx.Done():
		return driver.Result{}, ctx.Err()
	}
}

func (s *lateStore) Close() error { return nil }
