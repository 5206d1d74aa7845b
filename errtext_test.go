package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// wantSaidOnce fails unless err's text is one line that says "dlock: "
// only at its start and the name once.
func wantSaidOnce(t *testing.T, what string, err error, name string) {
	t.Helper()
	text := err.Error()
	if strings.Contains(text, "\n") || !strings.HasPrefix(text, "dlock: ") ||
		strings.Count(text, "dlock: ") != 1 || strings.Count(text, `"`+name+`"`) != 1 {
		t.Errorf("%s = %q, want one line saying \"dlock: \" at its start only and %q once", what, text, name)
	}
}

// The adversary is a reader of logs: each layer (the core, the driver,
// the sentinels) used to repeat the name and its own "pkg: " prefix,
// and Do's lost-lock error held a newline.
func TestErrorsSayItOnce(t *testing.T) {
	store := memlock.NewStore()
	a, _ := memlock.New(store)
	defer a.Close()
	b, _ := memlock.New(store)
	defer b.Close()
	k := testkit.MustTryAcquire(t, a, "job")

	_, err := b.TryAcquire(t.Context(), "job", dlock.WithLimit(2))
	if !errors.Is(err, dlock.ErrInvalid) || !errors.Is(err, driver.ErrMode) {
		t.Errorf("TryAcquire as a semaphore of a held lock = %v, want ErrInvalid and driver.ErrMode", err)
	}
	wantSaidOnce(t, "TryAcquire in another mode", err, "job")
	if want := `dlock: acquire "job" as a permit of a semaphore of 2: held as `; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("TryAcquire in another mode = %q, want it to start %q", err, want)
	}

	_, err = b.TryAcquire(t.Context(), "job")
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held name = %v, want ErrNotAcquired", err)
	}
	wantSaidOnce(t, "TryAcquire of a held name", err, "job")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.Acquire(ctx, "job")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with an ended ctx = %v, want context.Canceled", err)
	}
	wantSaidOnce(t, "Acquire with an ended ctx", err, "job")

	testkit.MustRelease(t, k)
	wantSaidOnce(t, "second Release", k.Release(t.Context()), "job")

	fnErr := errors.New("fn failed")
	err = a.Do(t.Context(), "do", func(ctx context.Context) error {
		a.Close() // lost under fn
		return fnErr
	})
	if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, fnErr) {
		t.Errorf("Do losing its lock = %v, want ErrLost and fn's error", err)
	}
	wantSaidOnce(t, "Do losing its lock", err, "do")
}
