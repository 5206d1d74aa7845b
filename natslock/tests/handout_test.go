package natslock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/natslock"
)

// slowStop is natslock's driver whose watches' stop waits, once entered,
// until the test lets it go on to natslock's own stop. It only picks the
// moment: natslock's stop deletes the watch's consumer on the server, a
// request that a server restarting, or a network cut, leaves unanswered
// for 5 s.
type slowStop struct {
	driver.Driver
	watching chan struct{} // closed when Watch has subscribed
	entered  chan struct{} // closed when a stop began
	proceed  chan struct{} // closed by the test: stop goes on
	once     sync.Once
}

func (s *slowStop) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	wake, stop, err := s.Driver.(driver.Notifier).Watch(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	close(s.watching)
	return wake, func() {
		s.once.Do(func() { close(s.entered) })
		<-s.proceed
		stop()
	}, nil
}

// TestHandOutWhileStopHangs: the adversary is a network cut between a
// waiter and the server that begins just after the waiter's Acquire step
// took the name, while the waiter ends its watch (whose stop is then a
// request the server never answers), and lasts until another Locker has
// taken the name over. The waiter's Acquire must hand out its handle
// without waiting for that stop: a handle handed out after the stop
// returned was lost meanwhile (its renewals could not reach the server,
// and the other Locker holds the name with a higher token), as the fault
// suite's nats row under restart-server saw (an Acquire that returned 5 s
// late, a token older than two later grants, Done already closed).
func TestHandOutWhileStopHangs(t *testing.T) {
	n := testserver.StartNATS(t)
	kv := bucket(t, n.URL(), "handout", 1)
	p := testserver.StartProxy(t, n.Addr())
	d, err := natslock.NewDriver(bucket(t, "nats://"+p.Addr(), "handout", 1), nil)
	if err != nil {
		t.Fatalf("natslock.NewDriver = %v", err)
	}
	s := &slowStop{Driver: d, watching: make(chan struct{}), entered: make(chan struct{}), proceed: make(chan struct{})}
	waiter := dlock.NewLocker(s, driver.LockerOptions{})
	t.Cleanup(func() { waiter.Close() })
	t.Cleanup(func() { p.Heal(t) })
	var proceedOnce sync.Once
	t.Cleanup(func() { proceedOnce.Do(func() { close(s.proceed) }) })

	name := testkit.UniqueName(t, "handout")
	holder := testkit.MustTryAcquire(t, newLocker(t, kv), name, dlock.WithTTL(ttl))
	type outcome struct {
		k         *dlock.Lock
		err       error
		lostAtOut bool // Done had closed when Acquire returned
	}
	got := make(chan outcome, 1)
	go func() { // exits when Acquire returns
		k, err := waiter.Acquire(t.Context(), name, dlock.WithTTL(ttl))
		got <- outcome{k, err, k != nil && k.Context().Err() != nil}
	}()
	<-s.watching
	testkit.MustRelease(t, holder)
	select {
	case <-s.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter's watch was not stopped within 30 s of the release")
	}
	p.Partition(t)
	other := testkit.MustAcquire(t, newLocker(t, kv), name, dlock.WithTTL(ttl))
	proceedOnce.Do(func() { close(s.proceed) })
	p.Heal(t)
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter's Acquire = %v, want the name (it was free when the waiter's step ran)", r.err)
	}
	if r.lostAtOut {
		t.Errorf("waiter's Acquire handed out a handle already lost (fence %d; the other Locker holds fence %d): %v",
			r.k.Fence(), other.Fence(), context.Cause(r.k.Context()))
	}
	if r.k.Fence() >= other.Fence() {
		t.Errorf("waiter's fence %d >= the later holder's %d", r.k.Fence(), other.Fence())
	}
	testkit.MustRelease(t, other)
}
