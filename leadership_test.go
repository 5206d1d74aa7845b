package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/memlock"
)

func TestDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, _ := memlock.New(store)
		defer l.Close()
		errWork := errors.New("work failed")

		// fn runs under the lock, its error comes back, the lock is freed.
		err := l.Do(t.Context(), "a", func(ctx context.Context) error {
			if _, _, held := store.Holder("a"); !held {
				t.Errorf("Do ran fn without the lock held")
			}
			return errWork
		})
		if !errors.Is(err, errWork) {
			t.Errorf("Do = %v, want fn's error", err)
		}
		if _, _, held := store.Holder("a"); held {
			t.Errorf("lock still held after Do returned")
		}

		// ctx cancelled while fn runs: fn's ctx ends, and the lock is
		// still freed although Release gets an ended ctx.
		ctx, cancel := context.WithCancel(t.Context())
		err = l.Do(ctx, "a", func(fctx context.Context) error {
			cancel()
			<-fctx.Done()
			return fctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do with ctx cancelled under fn = %v, want context.Canceled", err)
		}
		synctest.Wait()
		if _, _, held := store.Holder("a"); held {
			t.Errorf("lock still held after Do whose ctx was cancelled")
		}

		// The lock lost while fn runs: fn's ctx ends, Do's error wraps ErrLost.
		err = l.Do(t.Context(), "a", func(fctx context.Context) error {
			store.Expire("a") // the renewal will find it gone
			<-fctx.Done()
			return nil
		}, dlock.WithTTL(3*time.Second))
		if !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Do whose lock was lost under fn = %v, want ErrLost", err)
		}
	})
}

func TestAcquireAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		a, _ := memlock.New(store)
		defer a.Close()
		b, _ := memlock.New(store)
		defer b.Close()

		// Two callers taking the same names in opposite orders, many
		// times: no deadlock, and each gets its locks in its own order.
		var wg sync.WaitGroup
		for _, c := range []struct {
			l     *dlock.Locker
			names []string
		}{{a, []string{"x", "y", "z"}}, {b, []string{"z", "y", "x"}}} {
			wg.Go(func() {
				for range 20 {
					ks, err := c.l.AcquireAll(t.Context(), c.names)
					if err != nil {
						t.Errorf("AcquireAll(%q) = %v", c.names, err)
						return
					}
					for i, k := range ks {
						if k.Name() != c.names[i] {
							t.Errorf("AcquireAll(%q)[%d] is %q", c.names, i, k.Name())
						}
					}
					time.Sleep(time.Millisecond)
					for _, k := range ks {
						k.Release(t.Context())
					}
				}
			})
		}
		wg.Wait()

		// All or nothing: with "y" held elsewhere, a timed-out AcquireAll
		// leaves "x" free.
		ky, _ := b.TryAcquire(t.Context(), "y")
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := a.AcquireAll(ctx, []string{"y", "x"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("AcquireAll with y held = %v, want DeadlineExceeded", err)
		}
		if _, _, held := store.Holder("x"); held {
			t.Errorf("x left held after AcquireAll failed")
		}
		ky.Release(t.Context())

		for _, names := range [][]string{nil, {"x", "x"}} {
			if _, err := a.AcquireAll(t.Context(), names); !errors.Is(err, dlock.ErrInvalid) {
				t.Errorf("AcquireAll(%q) = %v, want ErrInvalid", names, err)
			}
		}
	})
}

func TestLead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		var leading atomic.Int32 // how many fns run at once
		var terms, leader atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		errs := make([]error, 2)
		drivers := make([]*faultDriver, 2)
		for i := range 2 {
			l, d := newFaulty(store, true)
			drivers[i] = d
			defer l.Close()
			wg.Go(func() {
				errs[i] = l.Lead(ctx, "leader", func(lctx context.Context) error {
					if n := leading.Add(1); n != 1 {
						t.Errorf("%d leaders at once", n)
					}
					defer leading.Add(-1)
					terms.Add(1)
					leader.Store(int32(i))
					<-lctx.Done() // lead until leadership is lost or ctx ends
					return nil
				}, dlock.WithTTL(3*time.Second))
			})
		}
		time.Sleep(time.Second)
		if got := terms.Load(); got != 1 {
			t.Fatalf("%d terms after 1s, want 1 leader", got)
		}
		// The leader can no longer renew: it must stop leading (Done
		// closes before its lease ends), and the other takes over once
		// the lease has run out, never while the first still leads.
		d := drivers[leader.Load()]
		d.mu.Lock()
		d.refreshErr = func(int) error { return errors.New("store unreachable") }
		d.mu.Unlock()
		time.Sleep(10 * time.Second)
		if got := terms.Load(); got < 2 {
			t.Errorf("%d terms after the leader could not renew, want a second term", got)
		}
		cancel()
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Lead %d after ctx ended = %v, want context.Canceled", i, err)
			}
		}

		// fn returning on its own ends Lead with fn's error, and frees the name.
		l, _ := memlock.New(store)
		defer l.Close()
		errDone := errors.New("done leading")
		if err := l.Lead(t.Context(), "leader", func(context.Context) error { return errDone }); !errors.Is(err, errDone) {
			t.Errorf("Lead whose fn returned = %v, want fn's error", err)
		}
		if _, _, held := store.Holder("leader"); held {
			t.Errorf("name still held after Lead returned")
		}
	})
}
