package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// stampDriver is a store whose clock says the holder's lease ran out less
// than the clock bound ago: every Acquire without the right Takeover gets
// Stamp, which is "A" until changeAt and "B" after (the holder renewed
// once more), with StampTTL ttl. An Acquire whose Takeover equals the
// current stamp takes the name with token 7.
type stampDriver struct {
	t0       time.Time
	changeAt time.Duration
	ttl      time.Duration
	refuse   bool // ignores Takeover, as a store whose state changed would

	mu       sync.Mutex
	calls    []stampCall
	held     string // owner, once taken
	refreshs []driver.Lease
}

type stampCall struct {
	at       time.Duration // since t0
	takeover string
	stamp    string // in the reply, "" if acquired
}

func (d *stampDriver) stamp(now time.Time) string {
	if now.Sub(d.t0) < d.changeAt {
		return "A"
	}
	return "B"
}

func (d *stampDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	s := d.stamp(now)
	c := stampCall{at: now.Sub(d.t0), takeover: l.Takeover}
	if len(d.calls) > 1000 {
		return driver.Result{}, errors.New("stampDriver: more than 1000 calls")
	}
	if d.held == l.Owner || (!d.refuse && l.Takeover != "" && l.Takeover == s) {
		d.held = l.Owner
		d.calls = append(d.calls, c)
		return driver.Result{Acquired: true, Fence: 7}, nil
	}
	c.stamp = s
	d.calls = append(d.calls, c)
	return driver.Result{Stamp: s, StampTTL: d.ttl, Remaining: time.Hour}, nil
}

func (d *stampDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := make([]error, len(ls))
	for i, l := range ls {
		d.refreshs = append(d.refreshs, l)
		if d.held != l.Owner || (l.Fence != 0 && l.Fence != 7) {
			errs[i] = driver.ErrNotHeld
		}
	}
	return errs
}

func (d *stampDriver) Release(ctx context.Context, l driver.Lease) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != l.Owner {
		return driver.ErrNotHeld
	}
	d.held = ""
	return nil
}

func (d *stampDriver) Close() error { return nil }

// A waiter takes a lease the store's clock says ran out (Result.Stamp)
// only after it has seen the same stamp for StampTTL on its own clock:
// not before, right after, counting again when the stamp changes; and
// TryAcquire never does.
func TestTakeoverAfterStampUnchangedForStampTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stampTTL = 5 * time.Second
		d := &stampDriver{t0: time.Now(), changeAt: 3 * time.Second, ttl: stampTTL}
		l := lockerOver(d)
		defer l.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		k, err := l.Acquire(ctx, "a", dlock.WithTTL(stampTTL))
		if err != nil {
			t.Fatalf("Acquire(%q) = %v, want a lock after the stamp stayed the same for %v", "a", err, stampTTL)
		}
		defer k.Release(t.Context())
		d.mu.Lock()
		calls := d.calls
		d.mu.Unlock()
		firstB := time.Duration(-1)
		for _, c := range calls {
			if c.stamp == "B" && firstB < 0 {
				firstB = c.at
			}
		}
		if firstB < 0 {
			t.Fatalf("calls = %+v, want a reply with stamp B", calls)
		}
		last := calls[len(calls)-1]
		for _, c := range calls[:len(calls)-1] {
			if c.takeover != "" {
				t.Errorf("Acquire sent Takeover %q at %v, before the stamp had been seen unchanged for %v (B first seen at %v)", c.takeover, c.at, stampTTL, firstB)
			}
		}
		if last.takeover != "B" {
			t.Fatalf("last call = %+v, want Takeover B", last)
		}
		if want := firstB + stampTTL; last.at != want {
			t.Errorf("Takeover sent at %v, want at %v (B first seen at %v, plus StampTTL %v)", last.at, want, firstB, stampTTL)
		}
		if k.Fence() != 7 {
			t.Errorf("Fence() = %d, want 7", k.Fence())
		}

		// The registered lease keeps no Takeover: its renewals carry the
		// token only.
		time.Sleep(stampTTL)
		d.mu.Lock()
		refreshes := d.refreshs
		d.mu.Unlock()
		if len(refreshes) == 0 {
			t.Fatalf("no renewal in %v with TTL %v", stampTTL, stampTTL)
		}
		for i, r := range refreshes {
			if r.Takeover != "" || r.Fence != 7 {
				t.Errorf("renewal %d: Takeover %q, Fence %d, want none and 7", i, r.Takeover, r.Fence)
			}
		}
	})
}

// A single attempt sends no Takeover on a stamp its Locker has not seen
// for StampTTL: not on a Locker's first TryAcquire, nor on later ones
// before then; one made once its Locker's earlier attempts saw the same
// stamp for StampTTL does (see TestTryAcquireTakesOverAfterObserving).
func TestTryAcquireTakesOverOnlyAfterStampTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stampTTL = time.Second
		d := &stampDriver{t0: time.Now(), changeAt: time.Hour, ttl: stampTTL, refuse: true}
		l := lockerOver(d)
		defer l.Close()
		for range 30 {
			k, err := l.TryAcquire(t.Context(), "a")
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryAcquire(%q) = %v, %v, want ErrNotAcquired from a store that refuses every takeover", "a", k, err)
			}
			time.Sleep(stampTTL / 5)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.calls) == 0 || d.calls[0].takeover != "" {
			t.Fatalf("first TryAcquire sent Takeover, want none: %+v", d.calls)
		}
		first, sent := d.calls[0].at, 0
		for _, c := range d.calls {
			if c.takeover == "" {
				continue
			}
			sent++
			if c.at < first+stampTTL {
				t.Errorf("TryAcquire sent Takeover %q at %v, want none before %v (stamp first seen at %v, plus StampTTL)", c.takeover, c.at, first+stampTTL, first)
			}
		}
		if sent == 0 {
			t.Errorf("no TryAcquire sent a Takeover in %d attempts over %v, want those after StampTTL to", len(d.calls), 30*stampTTL/5)
		}
	})
}

// A refused takeover does not make the waiter spin: it waits as usual
// before the next attempt.
func TestRefusedTakeoverDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stampTTL = time.Second
		d := &stampDriver{t0: time.Now(), changeAt: time.Hour, ttl: stampTTL, refuse: true}
		l := lockerOver(d)
		defer l.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := l.Acquire(ctx, "a")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire(%q) = %v, want context.DeadlineExceeded", "a", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		takeovers := 0
		for _, c := range d.calls {
			if c.takeover != "" {
				takeovers++
			}
		}
		// Past the first second the waiter polls at most every 2s
		// (driver.DefaultMaxRetryInterval) and at least every 1s (half
		// of it, the jitter's floor): about 5 to 9 takeovers in 9s.
		if takeovers == 0 || len(d.calls) > 100 {
			t.Errorf("in 10s: %d calls, %d with Takeover, want some takeovers and no spinning (at most 100 calls)", len(d.calls), takeovers)
		}
	})
}

// wallClockStore is a store whose leases run on its own wall clock, which
// tests can step, with the clock bound rule of driver.Result.Stamp: a
// lease its clock says ended less than bound ago is taken only with a
// Takeover equal to the holder's stamp (owner, token and renewal count),
// which it reports for live holders too, and honours whatever its clock
// says.
type wallClockStore struct {
	bound time.Duration

	mu      sync.Mutex
	offset  time.Duration // the store's clock minus the real one
	owner   string
	fence   uint64
	ttl     time.Duration
	expires time.Time // by the store's clock
	renewed int
}

func (s *wallClockStore) step(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
}

func (s *wallClockStore) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().Add(s.offset)
	stamp := fmt.Sprintf("%s|%d|%d", s.owner, s.fence, s.renewed)
	switch {
	case s.owner == "" || s.owner == l.Owner || l.Takeover == stamp:
	case now.Before(s.expires):
		return driver.Result{Stamp: stamp, StampTTL: s.ttl, Remaining: s.expires.Sub(now)}, nil
	case now.Before(s.expires.Add(s.bound)):
		return driver.Result{Stamp: stamp, StampTTL: s.ttl, Remaining: s.expires.Add(s.bound).Sub(now)}, nil
	}
	if s.owner != l.Owner {
		s.fence++
		s.owner, s.renewed = l.Owner, 0
	}
	s.ttl, s.expires = l.TTL, now.Add(l.TTL)
	return driver.Result{Acquired: true, Fence: s.fence}, nil
}

func (s *wallClockStore) Refresh(ctx context.Context, ls []driver.Lease) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().Add(s.offset)
	errs := make([]error, len(ls))
	for i, l := range ls {
		if s.owner != l.Owner || (l.Fence != 0 && l.Fence != s.fence) {
			errs[i] = driver.ErrNotHeld
			continue
		}
		s.expires, s.renewed = now.Add(l.TTL), s.renewed+1
	}
	return errs
}

func (s *wallClockStore) Release(ctx context.Context, l driver.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != l.Owner {
		return driver.ErrNotHeld
	}
	s.owner = ""
	return nil
}

func (s *wallClockStore) Close() error { return nil }

// With the takeover rule, a forward step of the store's clock (within the
// bound) does not let a waiter in while the holder renews; a crashed
// holder's name is taken by a process that was waiting StampTTL after it
// first saw the holder's last state (here the holder's TTL after the
// crash, since the waiter saw it at once), and by a fresh process
// StampTTL after it first looks (or at once once the store's clock says
// the lease ended more than the bound ago).
func TestWallClockStepAndTakeover(t *testing.T) {
	const ttl, bound = 1500 * time.Millisecond, 10 * time.Second
	t.Run("forward step", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := &wallClockStore{bound: bound}
			holder, waiter := lockerOver(s), lockerOver(s)
			defer holder.Close()
			defer waiter.Close()
			k, err := holder.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
			if err != nil {
				t.Fatalf("Acquire(%q) = %v", "a", err)
			}
			got := make(chan error, 1)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			go func() {
				k2, err := waiter.Acquire(ctx, "a", dlock.WithTTL(ttl))
				if err == nil {
					if !testkit.IsClosed(k.Done()) {
						t.Errorf("the waiter got the name (Fence %d) while the holder's Done was open", k2.Fence())
					}
					k2.Release(context.Background())
				}
				got <- err
			}()
			time.Sleep(ttl / 2)
			s.step(5 * time.Second) // the store's lease ends at once, by its clock
			time.Sleep(20 * time.Second)
			if testkit.IsClosed(k.Done()) {
				t.Fatalf("holder lost the lock after a +5s step of the store's clock: %v", context.Cause(k.Context()))
			}
			k.Release(t.Context())
			if err := <-got; err != nil {
				t.Errorf("waiter's Acquire(%q) after the holder released = %v, want a lock", "a", err)
			}
		})
	})
	t.Run("crash", func(t *testing.T) {
		for _, fresh := range []time.Duration{0, 5 * time.Second, 12 * time.Second} {
			synctest.Test(t, func(t *testing.T) {
				s := &wallClockStore{bound: bound}
				holder, waiter := lockerOver(s), lockerOver(s)
				defer holder.Close()
				defer waiter.Close()
				start := time.Now()
				// A holder that never renews: it crashed right after taking the name.
				if _, err := holder.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal()); err != nil {
					t.Fatalf("Acquire(%q) = %v", "a", err)
				}
				time.Sleep(fresh) // 0: a process already waiting
				asked := time.Now()
				k, err := waiter.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
				if err != nil {
					t.Fatalf("Acquire(%q) = %v", "a", err)
				}
				took := time.Since(start)
				t.Logf("waiter started %v after the crash, got the name %v after the crash (%v after it asked); TTL %v, bound %v", fresh, took, time.Since(asked), ttl, bound)
				var want time.Duration
				switch {
				case fresh < ttl+bound:
					want = fresh + ttl // StampTTL from when it first looked
				default:
					want = fresh // ended more than the bound ago: free
				}
				if took < want || took > want+100*time.Millisecond {
					t.Errorf("got the name %v after the crash, want %v", took, want)
				}
				k.Release(t.Context())
			})
		}
	})
}

// A caller that only ever makes single attempts (a scheduler's tick, each
// a TryAcquire) takes over a crashed holder's lease in doubt once its
// Locker's earlier attempts saw the same stamp for StampTTL, not before;
// a Locker that never tried before does not.
func TestTryAcquireTakesOverAfterObserving(t *testing.T) {
	const ttl, bound = 1500 * time.Millisecond, 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		s := &wallClockStore{bound: bound}
		holder, ticker := lockerOver(s), lockerOver(s)
		defer holder.Close()
		defer ticker.Close()
		crashed := time.Now()
		if _, err := holder.Acquire(t.Context(), "a", dlock.WithTTL(ttl), dlock.WithoutRenewal()); err != nil {
			t.Fatalf("Acquire(%q) = %v", "a", err)
		}
		time.Sleep(2 * time.Second) // the lease ended by the store's clock: in doubt
		var took time.Duration
		for tick := 0; tick < 20; tick++ {
			k, err := ticker.TryAcquire(t.Context(), "a", dlock.WithTTL(ttl))
			if err == nil {
				took = time.Since(crashed)
				k.Release(t.Context())
				break
			}
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryAcquire(%q) = %v, want ErrNotAcquired or a lock", "a", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		// First seen at 2 s, so taken at the first tick at or after 3.5 s.
		if want := 2*time.Second + ttl; took != want {
			t.Errorf("ticking TryAcquire took the name %v after the crash, want %v (first seen at 2s, plus the holder's TTL)", took, want)
		}
	})
}
