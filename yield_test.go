package dlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

// The adversary of these tests is the releasing process's head start on a
// store that wakes waiters but does not queue them (SQLite's wake files,
// PostgreSQL's NOTIFY): the Locker that releases a name rings its own
// waiter at once, while every Locker's notification of the release
// arrives later (notifyLag). A Locker that released would then keep a
// contended name among its own callers: `dlock demo` on SQLite gave Jain's
// index over its 4 processes 0.72 to 0.84.

const (
	releaseStep = time.Millisecond       // how long the store's release step takes
	notifyLag   = 500 * time.Microsecond // from the release to every Locker's notification
)

// laggedStore is memlock's driver whose releases take releaseStep and
// whose notifications arrive notifyLag after the release.
type laggedStore struct {
	driver.Driver
	notifier driver.Notifier
}

func newLaggedStore() laggedStore {
	d := memlock.NewStore().Driver()
	return laggedStore{Driver: d, notifier: d.(driver.Notifier)}
}

func (s laggedStore) Release(ctx context.Context, l driver.Lease) error {
	time.Sleep(releaseStep)
	return s.Driver.Release(ctx, l)
}

func (s laggedStore) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	in, stop, err := s.notifier.Watch(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	out, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		for {
			select {
			case <-in:
				time.Sleep(notifyLag)
				select {
				case out <- struct{}{}:
				default:
				}
			case <-done:
				return
			}
		}
	}()
	return out, func() { stop(); close(done) }, nil
}

func (s laggedStore) locker(t *testing.T) *dlock.Locker {
	l := dlock.NewLocker(s, driver.LockerOptions{})
	t.Cleanup(func() { l.Close() })
	return l
}

type acquired struct {
	k   *dlock.Lock
	err error
}

func acquireAsync(l *dlock.Locker, name string) chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		k, err := l.Acquire(context.Background(), name)
		ch <- acquired{k, err}
	}()
	return ch
}

// mustGet waits for an Acquire's result, for at most a minute of the
// bubble's time (a waiter that the store never serves fails the test
// instead of hanging it: renewals keep the bubble's clock going).
func mustGet(t *testing.T, who string, ch chan acquired) *dlock.Lock {
	t.Helper()
	var r acquired
	select {
	case r = <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not acquired after a minute", who)
	}
	if r.err != nil {
		t.Fatalf("%s: Acquire = %v", who, r.err)
	}
	return r.k
}

// TestReleaserYieldsToOtherLockers: Locker A has seen Locker B hold the
// name; when A releases it with a waiter of its own (a2) and one of B's
// (b2) waiting, b2 gets it, although a2 was rung first.
func TestReleaserYieldsToOtherLockers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLaggedStore()
		a, b := s.locker(t), s.locker(t)
		ctx := context.Background()
		kb, err := b.TryAcquire(ctx, "n")
		if err != nil {
			t.Fatalf("B: TryAcquire = %v", err)
		}
		a1 := acquireAsync(a, "n")
		synctest.Wait() // a1 found the name held by B
		if err := kb.Release(ctx); err != nil {
			t.Fatalf("B: Release = %v", err)
		}
		ka := mustGet(t, "a1", a1)
		b2 := acquireAsync(b, "n")
		synctest.Wait()
		a2 := acquireAsync(a, "n")
		synctest.Wait()
		if err := ka.Release(ctx); err != nil {
			t.Fatalf("a1: Release = %v", err)
		}
		k := mustGet(t, "b2", b2)
		synctest.Wait()
		select {
		case r := <-a2:
			t.Fatalf("a2 acquired (%v) while b2 holds, want it waiting", r.err)
		default:
		}
		if err := k.Release(ctx); err != nil {
			t.Fatalf("b2: Release = %v", err)
		}
		mustGet(t, "a2", a2).Release(ctx)
	})
}

// TestReleaserWithoutRivalsDoesNotYield: a Locker that never saw another
// hold the name hands it to its own waiter as soon as the release step
// ends, and TryAcquire never waits.
func TestReleaserWithoutRivalsDoesNotYield(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newLaggedStore()
		a := s.locker(t)
		ctx := context.Background()
		k, err := a.TryAcquire(ctx, "n")
		if err != nil {
			t.Fatalf("TryAcquire = %v", err)
		}
		a2 := acquireAsync(a, "n")
		synctest.Wait()
		start := time.Now()
		if err := k.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
		k2 := mustGet(t, "a2", a2)
		if d := time.Since(start); d != releaseStep {
			t.Errorf("the waiter acquired %v after the release began, want %v (the release step, no yield)", d, releaseStep)
		}
		start = time.Now()
		if err := k2.Release(ctx); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if _, err := a.TryAcquire(ctx, "n"); err != nil || time.Since(start) != releaseStep {
			t.Errorf("TryAcquire after a release = %v, %v after the release began; want a lock at once", err, time.Since(start))
		}
	})
}
