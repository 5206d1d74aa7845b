package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

// recorder is a Hook that keeps every event it hears of.
type recorder struct {
	mu       sync.Mutex
	starts   []hook.AcquireStart
	dones    []hook.AcquireDone
	doneCtx  []context.Context
	reenters []hook.Reentry
	renewals []hook.Renewal
	losses   []hook.Loss
	releases []hook.Release
	held     int // acquired - lost - released
}

type spanKey struct{}

func (r *recorder) asHook() hook.Hook {
	return hook.Hook{
		AcquireStart: func(ctx context.Context, e hook.AcquireStart) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.starts = append(r.starts, e)
			return context.WithValue(ctx, spanKey{}, e.Name)
		},
		AcquireDone: func(ctx context.Context, e hook.AcquireDone) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.dones = append(r.dones, e)
			r.doneCtx = append(r.doneCtx, ctx)
			if e.Outcome == hook.Acquired {
				r.held++
			}
		},
		Reentered: func(ctx context.Context, e hook.Reentry) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reenters = append(r.reenters, e)
		},
		Renewed: func(e hook.Renewal) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.renewals = append(r.renewals, e)
		},
		Lost: func(ctx context.Context, e hook.Loss) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.losses = append(r.losses, e)
			r.held--
		},
		Released: func(ctx context.Context, e hook.Release) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.releases = append(r.releases, e)
			r.held--
		},
	}
}

func hooked(t *testing.T, store *memlock.Store) (*dlock.Locker, *recorder) {
	t.Helper()
	l, err := memlock.New(store)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	l.AddHook(r.asHook())
	return l, r
}

func TestHooksUncontendedCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, r := hooked(t, memlock.NewStore())
		defer l.Close()
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(3*time.Second), dlock.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := k.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(r.starts) != 1 || len(r.dones) != 1 || len(r.releases) != 1 {
			t.Fatalf("events: %d starts, %d dones, %d releases, want 1 each", len(r.starts), len(r.dones), len(r.releases))
		}
		want := hook.AcquireStart{Backend: "memory", Name: "a", Wait: true, TTL: 3 * time.Second}
		if r.starts[0] != want {
			t.Errorf("AcquireStart = %+v, want %+v", r.starts[0], want)
		}
		d := r.dones[0]
		if d.AcquireStart != want || d.Outcome != hook.Acquired || d.Err != nil || d.Fence != k.Fence() ||
			d.Owner != k.Owner() || d.Attempts != 1 || d.Contended || d.Ahead != -1 || d.Duration != 0 {
			t.Errorf("AcquireDone = %+v, want acquired with fence %d, owner %q, 1 attempt, uncontended, Ahead -1, no time passed", d, k.Fence(), k.Owner())
		}
		if got := r.doneCtx[0].Value(spanKey{}); got != "a" {
			t.Errorf("AcquireDone's ctx carries %v, want the value AcquireStart put in it", got)
		}
		rel := r.releases[0]
		if rel.Name != "a" || rel.Fence != k.Fence() || rel.Owner != k.Owner() || rel.Outcome != hook.Released ||
			rel.Held != time.Second || rel.Closed || rel.Err != nil {
			t.Errorf("Released = %+v, want released after 1s held", rel)
		}
		if r.held != 0 {
			t.Errorf("held count after release = %d, want 0", r.held)
		}
	})
}

func TestHooksContendedOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		a, _ := hooked(t, store)
		defer a.Close()
		b, r := hooked(t, store)
		defer b.Close()
		ka, err := a.Acquire(t.Context(), "x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(t.Context(), "x"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire = %v, want ErrNotAcquired", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err = b.Acquire(ctx, "x")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with 2s deadline = %v, want DeadlineExceeded", err)
		}
		got := make(chan *dlock.Lock)
		go func() {
			k, err := b.Acquire(t.Context(), "x")
			if err != nil {
				t.Error(err)
			}
			got <- k
		}()
		time.Sleep(5 * time.Second)
		ka.Release(t.Context())
		kb := <-got
		defer kb.Release(t.Context())

		if len(r.dones) != 3 {
			t.Fatalf("%d AcquireDone events, want 3", len(r.dones))
		}
		if d := r.dones[0]; d.Outcome != hook.NotAcquired || d.Wait || !d.Contended || d.Attempts != 1 {
			t.Errorf("TryAcquire's AcquireDone = %+v, want not_acquired, contended, 1 attempt", d)
		}
		if d := r.dones[1]; d.Outcome != hook.Canceled || !d.Contended || d.Duration != 2*time.Second || !errors.Is(d.Err, context.DeadlineExceeded) {
			t.Errorf("cancelled Acquire's AcquireDone = %+v, want canceled after 2s, contended", d)
		}
		if d := r.dones[2]; d.Outcome != hook.Acquired || !d.Contended || d.Duration != 5*time.Second || d.Fence != kb.Fence() || d.Attempts < 2 {
			t.Errorf("waiting Acquire's AcquireDone = %+v, want acquired after 5s, contended, fence %d, 2+ attempts", d, kb.Fence())
		}
	})
}

func TestHooksReentryAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, r := hooked(t, memlock.NewStore())
		k, err := l.Acquire(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		k2, err := l.Acquire(k.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(r.starts) != 1 || len(r.reenters) != 1 {
			t.Fatalf("%d starts and %d re-entries, want 1 and 1 (a re-entry is not an acquisition)", len(r.starts), len(r.reenters))
		}
		if e := r.reenters[0]; e.Name != "a" || e.Fence != k.Fence() || e.Owner != k.Owner() || e.Handles != 2 {
			t.Errorf("Reentered = %+v, want fence %d and 2 handles", e, k.Fence())
		}
		k2.Release(t.Context())
		if len(r.releases) != 0 {
			t.Fatalf("releasing one of two handles reported %d releases, want 0", len(r.releases))
		}
		time.Sleep(time.Minute)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if len(r.releases) != 1 || !r.releases[0].Closed || r.releases[0].Outcome != hook.Released || r.releases[0].Held != time.Minute {
			t.Fatalf("after Close: releases %+v, want one, closed, released, held 1m", r.releases)
		}
		if r.held != 0 {
			t.Errorf("held count after Close = %d, want 0", r.held)
		}
	})
}

func TestHooksRenewalsAndLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		l, d := newFaulty(store, true)
		defer l.Close()
		r := &recorder{}
		l.AddHook(r.asHook())
		const ttl = 3 * time.Second
		renewed, err := l.Acquire(t.Context(), "renewed", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		lapsing, err := l.Acquire(t.Context(), "lapsing", dlock.WithTTL(ttl), dlock.WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		<-lapsing.Done()
		synctest.Wait() // the keeper reports the loss after closing Done
		r.mu.Lock()
		// The renewed lock is renewed every TTL/3.
		if len(r.renewals) != 2 {
			t.Fatalf("%d renewal batches before the lapse at 2.7s, want 2 (at 1s and 2s)", len(r.renewals))
		}
		if e := r.renewals[0]; e.Size != 1 || e.Renewed != 1 || e.NotHeld != 0 || e.Failed != 0 || e.Err != nil || e.Backend != "dlock_test" {
			t.Errorf("Renewed = %+v, want 1 of 1 renewed (backend named after the wrapping driver's package)", e)
		}
		if len(r.losses) != 1 {
			t.Fatalf("%d losses, want 1", len(r.losses))
		}
		if e := r.losses[0]; e.Name != "lapsing" || e.Reason != hook.LossExpired || e.Held != ttl-ttl/10 ||
			e.Fence != lapsing.Fence() || !errors.Is(e.Cause, dlock.ErrLost) {
			t.Errorf("Lost = %+v, want lapsing expired after %v", e, ttl-ttl/10)
		}

		r.mu.Unlock()

		// A transient failure, then the store says the lease is gone.
		calls := 0
		d.mu.Lock()
		d.refreshErr = func(int) error {
			calls++
			if calls == 1 {
				return errors.New("connection reset")
			}
			return driver.ErrNotHeld
		}
		d.mu.Unlock()
		<-renewed.Done()
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		n := len(r.renewals)
		if n < 3 {
			t.Fatalf("%d renewal batches, want a failed one and a not-held one after the first", n)
		}
		if e := r.renewals[n-2]; e.Failed != 1 || e.Err == nil || e.Renewed != 0 {
			t.Errorf("transient batch = %+v, want 1 failed with its error", e)
		}
		if e := r.renewals[n-1]; e.NotHeld != 1 || !errors.Is(e.Err, driver.ErrNotHeld) {
			t.Errorf("last batch = %+v, want 1 not held", e)
		}
		if len(r.losses) != 2 || r.losses[1].Reason != hook.LossNotHeld || r.losses[1].Name != "renewed" {
			t.Fatalf("losses = %+v, want a second, not_held, for renewed", r.losses)
		}
		r.mu.Unlock()
		if err := renewed.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Release after loss = %v, want ErrNotHeld", err)
		}
		r.mu.Lock()
		if len(r.releases) != 0 || r.held != 0 {
			t.Errorf("releases %d, held %d: a lost lock's Release is not a release, want 0 and 0", len(r.releases), r.held)
		}
	})
}

func TestAddHookWhileBusy(t *testing.T) {
	l, err := memlock.New(memlock.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				k, err := l.Acquire(t.Context(), "busy")
				if err != nil {
					t.Error(err)
					return
				}
				k.Release(t.Context())
			}
		})
	}
	recs := make([]*recorder, 20)
	for i := range recs {
		recs[i] = &recorder{}
		l.AddHook(recs[i].asHook())
	}
	wg.Wait()
	k, err := l.Acquire(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	k.Release(t.Context())
	for i, r := range recs {
		r.mu.Lock()
		// A call reports to the hooks there were when it began, so a
		// hook added while calls are under way hears the release but not
		// the acquisition of each: at most one per worker. It can never
		// hear an acquisition without its release.
		if r.held > 0 || r.held < -4 {
			t.Errorf("hook %d: held count %d after all released, want between -4 (one call per worker missed) and 0", i, r.held)
		}
		if n := len(r.dones); n == 0 || r.dones[n-1].Fence != k.Fence() {
			t.Errorf("hook %d did not hear the last acquisition", i)
		}
		r.mu.Unlock()
	}
}
