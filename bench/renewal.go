package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
)

// Issue 28: the automatic renewal of many locks held by one Locker. The
// core renews in batches (one driver.Refresh call for the locks due at
// about the same time, see hook.Renewal); each driver batches again
// inside the call: Redis pipelines, the SQL stores send one statement
// (exclusive locks) or one transaction (shared holds, permits) per 200
// leases, ZooKeeper and etcd renew their session only (a lock is an
// ephemeral node, a key under the session's lease).

// renewHeld are the held-lock counts of the renewal table, each capped
// by heldCap.
var renewHeld = []int{1000, 10_000, 100_000}

// renewTTL is the lease of the renewal runs' locks: the core renews every
// TTL/3, so a cycle over all of them takes about 20 s. Long enough that
// no lease runs out while 64 goroutines fill the Locker with 100,000
// names on a loaded machine: with 15 s, MariaDB's and Redis' renewals
// fell behind the fill there (25,000 and 9,000 of 100,000 leases not
// renewed within 75 s), on a 2-core machine at load 40.
const renewTTL = 60 * time.Second

// Metrics of the renewal runs.
const (
	mRenewTime  = "renew_time"  // driver time to renew every held lock once, ns
	mRenewCalls = "renew_calls" // driver calls it took
	mRenewMax   = "renew_max"   // leases in its largest call
	mRenewLost  = "renew_lost"  // leases the store no longer had: lost
	mRenewFail  = "renew_fail"  // leases whose renewal failed (retried)
	mFillTime   = "fill_time"   // time to take the k locks (-fill-workers goroutines), ns
	mCloseTime  = "close_time"  // releasing the most locks held (-fill-workers goroutines), ns
)

// renewCounts add up renewal batches.
type renewCounts struct {
	calls, leases, most int
	lost, failed        int
	firstErr            error // the first failed lease's error
	time                time.Duration
}

// renewTally adds up the renewal batches a Locker's hook reports.
type renewTally struct {
	mu sync.Mutex
	c  renewCounts
}

func (r *renewTally) renewed(e hook.Renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.calls++
	r.c.leases += e.Size
	r.c.most = max(r.c.most, e.Size)
	r.c.lost += e.NotHeld
	r.c.failed += e.Failed
	if r.c.firstErr == nil {
		r.c.firstErr = e.Err
	}
	r.c.time += e.Duration
}

// cycle forgets the batches so far, then waits until batches of at least
// k leases in all completed (every held lock renewed once) or until
// timeout, and returns them.
func (r *renewTally) cycle(k int, timeout time.Duration) (renewCounts, error) {
	r.mu.Lock()
	r.c = renewCounts{}
	r.mu.Unlock()
	end := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		got := r.c
		r.mu.Unlock()
		if got.leases >= k {
			return got, nil
		}
		if time.Now().After(end) {
			return got, fmt.Errorf("%d of %d leases renewed in %v", got.leases, k, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// renewSharedStores are the stores whose shared holds are renewed apart
// from their exclusive locks (in a transaction per batch, not a
// statement), measured in rows of their own.
var renewSharedStores = []string{"MariaDB", "Postgres", "SQLite"}

// renewKey is the renewal figures' key of k locks (shared holds with
// shared) on store.
func renewKey(store string, shared bool, k int) string {
	if shared {
		store += " (shared holds)"
	}
	return scaleKey(store, k)
}

// sharedLocker takes names as shared holds.
type sharedLocker struct{ *dlockLocker }

func (s sharedLocker) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	k, err := s.l.Acquire(ctx, name, dlock.WithTTL(s.ttl), dlock.Shared())
	if err != nil {
		return nil, err
	}
	return k.Release, nil
}

// renewalScaling holds k locks (shared holds with shared) with a
// renewTTL lease in one Locker, for each k of renewHeld up to heldCap,
// and records the driver calls and time of one renewal cycle over all
// of them.
func (b *bench) renewalScaling(st store, shared bool) error {
	lk, err := scaleLib(st).open(st.url, renewTTL)
	if err != nil {
		return err
	}
	defer lk.close()
	dl, ok := lk.(*dlockLocker)
	if !ok {
		return errors.New("not a dlock Locker")
	}
	var tally renewTally
	dl.l.AddHook(hook.Hook{Renewed: tally.renewed})
	if shared {
		lk = sharedLocker{dl}
	}
	prefix := fmt.Sprintf("renew:%d:", time.Now().UnixNano())
	hs := heldSet{lk: lk, workers: *fillWorkers}
	var filling time.Duration
	for _, k := range renewHeld {
		if k > b.heldCap(st.name) {
			break
		}
		start := time.Now()
		if err := hs.fill(k, func(i int) string { return fmt.Sprintf("%s%07d", prefix, i) }); err != nil {
			return fmt.Errorf("take %d locks: %w", k, err)
		}
		filling += time.Since(start)
		c, err := tally.cycle(k, renewTTL+time.Minute)
		if err != nil {
			return fmt.Errorf("renew %d locks: %w", k, err)
		}
		key := renewKey(st.name, shared, k)
		b.i28.renew.add(key, mFillTime, float64(filling))
		b.i28.renew.add(key, mRenewTime, float64(c.time))
		b.i28.renew.add(key, mRenewCalls, float64(c.calls))
		b.i28.renew.add(key, mRenewMax, float64(c.most))
		b.i28.renew.add(key, mRenewLost, float64(c.lost))
		b.i28.renew.add(key, mRenewFail, float64(c.failed))
		b.progress("renewal %s: %v in %d call(s), largest %d, %d lost, %d failed (first error: %v); filled in %v", key, c.time, c.calls, c.most, c.lost, c.failed, c.firstErr, filling)
	}
	return b.releaseHeld(&hs, st, renewKey(st.name, shared, len(hs.unlocks)))
}

// releaseHeld releases the locks of hs, those of the renewal figures'
// key, and records how long it took.
func (b *bench) releaseHeld(hs *heldSet, st store, key string) error {
	if st.name == "Redis" { // Close releases each lock: let it find none
		return b.admin.FlushAll(context.Background()).Err()
	}
	start := time.Now()
	err := hs.release()
	b.i28.renew.add(key, mCloseTime, float64(time.Since(start)))
	return err
}
