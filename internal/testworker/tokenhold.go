package testworker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// TokenHold is a worker for any backend, for Lock.Token and lock-delay
// tests: args are a store URL (its backend must be imported by the test
// package), a lock name, a TTL and a lock-delay. It takes the lock
// (renewed) and prints "token TOKEN"; when its Done closes it prints
// "lost", then "release notheld" and whether its Release got
// ErrNotHeld; on SIGTERM it releases and prints "released" with the
// error.
func TokenHold(ctx context.Context, args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("tokenhold: want STORE NAME TTL DELAY, got %q", args)
	}
	l, name, ttl, err := OpenStore(ctx, "tokenhold", args[:3])
	if err != nil {
		return err
	}
	defer l.Close()
	delay, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	k, err := l.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithLockDelay(delay))
	if err != nil {
		return err
	}
	fmt.Println("token", k.Token())
	select {
	case <-k.Done():
		fmt.Println("lost")
		err := k.Release(context.Background())
		fmt.Println("release notheld", errors.Is(err, dlock.ErrNotHeld))
	case <-ctx.Done():
		fmt.Println("released", k.Release(context.Background()))
	}
	return nil
}

// ResumeFromTokenHold runs the cross-process Resume scenario against a
// TokenHold worker w that holds name with ttl (and no lock-delay): b
// resumes the worker's hold from its printed token, refreshes and
// releases it while the worker still runs, and c takes name. The
// worker's next renewal must report the loss, its late Release must get
// ErrNotHeld, and c's hold must survive it. It returns how long after
// the Resume the worker reported the loss.
func ResumeFromTokenHold(t testing.TB, w *Process, b, c *dlock.Locker, name string, ttl time.Duration) time.Duration {
	t.Helper()
	const slack = 2 * time.Second
	tok := w.Expect(t, "token", 30*time.Second)
	k, err := b.Resume(t.Context(), tok)
	if err != nil {
		t.Fatalf("Resume(the worker's token) = %v, want a lock", err)
	}
	resumed := time.Now()
	if err := k.Refresh(t.Context()); err != nil {
		t.Errorf("the resumed lock's Refresh = %v, want nil", err)
	}
	testkit.MustRelease(t, k)
	third := testkit.MustTryAcquire(t, c, name, dlock.WithTTL(time.Minute))
	w.Expect(t, "lost", ttl+slack)
	lost := time.Since(resumed)
	if got := w.Expect(t, "release notheld", slack); got != "true" {
		t.Errorf("the worker's Release after the loss: ErrNotHeld %s, want true", got)
	}
	if err := third.Refresh(t.Context()); err != nil {
		t.Errorf("the third owner's Refresh after the worker's late Release = %v, want nil", err)
	}
	testkit.MustRelease(t, third)
	return lost
}
