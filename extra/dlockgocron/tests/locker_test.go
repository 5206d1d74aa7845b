package dlockgocron_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockgocron"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

func isHeld(store *memlock.Store, name string) bool {
	_, _, held := store.Holder(name)
	return held
}

// unlock calls Unlock and checks that it freed name.
func unlock(t *testing.T, store *memlock.Store, lk gocron.Lock, name string) {
	t.Helper()
	if err := lk.Unlock(t.Context()); err != nil {
		t.Errorf("Unlock = %v, want nil", err)
	}
	if isHeld(store, name) {
		t.Errorf("%q still held after Unlock", name)
	}
}

func TestLockerHoldsAtLeastMinHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 2)
		k1, k2 := dlockgocron.NewLocker(ls[0], nil), dlockgocron.NewLocker(ls[1], nil)
		start := time.Now()
		lk, err := k1.Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) = %v, want a lock", "job", err)
		}
		if _, err := k2.Lock(t.Context(), "job"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("Lock(%q) by another process = %v, want ErrNotAcquired", "job", err)
		}

		// The job returns at once: Unlock keeps the lock until MinHold.
		unlocked := make(chan error, 1)
		go func() { unlocked <- lk.Unlock(t.Context()) }()
		time.Sleep(dlockgocron.DefaultMinHold - time.Millisecond)
		synctest.Wait()
		select {
		case err := <-unlocked:
			t.Fatalf("Unlock returned %v after %v, want it to wait out MinHold %v", err, time.Since(start), dlockgocron.DefaultMinHold)
		default:
		}
		if _, err := k2.Lock(t.Context(), "job"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("Lock(%q) by another process within MinHold = %v, want ErrNotAcquired", "job", err)
		}
		if err := <-unlocked; err != nil {
			t.Errorf("Unlock = %v, want nil", err)
		}
		if got := time.Since(start); got != dlockgocron.DefaultMinHold {
			t.Errorf("Unlock returned after %v, want MinHold %v", got, dlockgocron.DefaultMinHold)
		}
		if isHeld(store, "job") {
			t.Errorf("%q still held after Unlock", "job")
		}
		lk2, err := k2.Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) by another process after Unlock = %v, want a lock", "job", err)
		}
		// MinHold counts from Lock: a job longer than it releases at once.
		time.Sleep(2 * dlockgocron.DefaultMinHold)
		start = time.Now()
		unlock(t, store, lk2, "job")
		if got := time.Since(start); got != 0 {
			t.Errorf("Unlock after a run longer than MinHold took %v, want 0", got)
		}
	})
}

func TestLockerRenewsWhileJobRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 2)
		k1, k2 := dlockgocron.NewLocker(ls[0], nil, dlock.WithTTL(time.Second)), dlockgocron.NewLocker(ls[1], nil)
		lk, err := k1.Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) = %v, want a lock", "job", err)
		}
		time.Sleep(10 * time.Second) // ten TTLs of job
		info, err := ls[0].Inspect(t.Context(), "job")
		if err != nil || len(info) != 1 || info[0].Remaining > time.Second {
			t.Errorf("Inspect(%q) = %+v, %v; want one holder with at most the TTL (1s) left", "job", info, err)
		}
		if _, err := k2.Lock(t.Context(), "job"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("Lock(%q) by another process after 10 TTLs of job = %v, want ErrNotAcquired", "job", err)
		}
		unlock(t, store, lk, "job")
	})
}

func TestLockerOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 1)
		k := dlockgocron.NewLocker(ls[0], &dlockgocron.LockerOptions{Prefix: "cron/", MinHold: -1})
		lk, err := k.Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) = %v, want a lock", "job", err)
		}
		if !isHeld(store, "cron/job") || isHeld(store, "job") {
			t.Errorf("Lock(%q) with Prefix %q holds %q: %v, %q: %v; want only the prefixed name",
				"job", "cron/", "cron/job", isHeld(store, "cron/job"), "job", isHeld(store, "job"))
		}
		start := time.Now()
		if err := lk.Unlock(t.Context()); err != nil {
			t.Errorf("Unlock = %v, want nil", err)
		}
		if got := time.Since(start); got != 0 || isHeld(store, "cron/job") {
			t.Errorf("Unlock with MinHold -1 took %v (held after: %v), want an immediate release", got, isHeld(store, "cron/job"))
		}

		if _, err := dlockgocron.NewLocker(nil, nil).Lock(t.Context(), "job"); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Lock on a nil dlock.Locker = %v, want ErrInvalid", err)
		}
		if _, err := k.Lock(t.Context(), string([]byte{0})); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Lock(%q) = %v, want ErrInvalid", "\x00", err)
		}
	})
}

func TestLockerUnlockContextEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 1)
		lk, err := dlockgocron.NewLocker(ls[0], nil).Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) = %v, want a lock", "job", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		time.AfterFunc(100*time.Millisecond, cancel)
		lk.Unlock(ctx) // its error may wrap ctx's: the release may finish in the background
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("Unlock whose ctx ended after 100ms returned after %v, want 100ms", got)
		}
		synctest.Wait()
		if isHeld(store, "job") {
			t.Errorf("%q still held after Unlock whose ctx ended", "job")
		}
	})
}

func TestLockerUnlockLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, ls := testkit.MemLockers(t, 2)
		lk, err := dlockgocron.NewLocker(ls[0], nil, dlock.WithTTL(time.Second)).Lock(t.Context(), "job")
		if err != nil {
			t.Fatalf("Lock(%q) = %v, want a lock", "job", err)
		}
		store.Expire("job")
		if _, err := dlockgocron.NewLocker(ls[1], nil).Lock(t.Context(), "job"); err != nil {
			t.Fatalf("Lock(%q) after expiry = %v, want a lock", "job", err)
		}
		time.Sleep(time.Second) // the renewal finds the lease gone
		if err := lk.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Unlock of a lost lock = %v, want ErrNotHeld", err)
		}
	})
}
