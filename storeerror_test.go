package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

// storeRefusal is a store's own error type, as a client library has one
// (redis.Error, pgconn.PgError): callers reach it with errors.As.
type storeRefusal struct{ code string }

func (e *storeRefusal) Error() string { return e.code + ": refused by the store" }

var (
	errNoPerm    = &storeRefusal{"NOPERM"}
	errFull      = &storeRefusal{"FULL"}
	errLinkReset = errors.New("read tcp 127.0.0.1:6379: connection reset by peer")
)

// classifyingDriver is a faultDriver whose Classify knows the errors
// above, and whose Acquire fails with acquireErr when it is set.
type classifyingDriver struct {
	*faultDriver
	acquireErr error
}

func (d classifyingDriver) Classify(err error) driver.ErrorKind {
	switch {
	case errors.Is(err, errNoPerm):
		return driver.ErrorDenied
	case errors.Is(err, errFull):
		return driver.ErrorNoSpace
	case errors.Is(err, errLinkReset):
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

func (d classifyingDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	if d.acquireErr != nil {
		return driver.Result{}, d.acquireErr
	}
	return d.faultDriver.Acquire(ctx, l)
}

func newClassifying(store *memlock.Store, acquireErr error) (*dlock.Locker, *faultDriver) {
	d := &faultDriver{Driver: store.Driver()}
	return lockerOver(classifyingDriver{d, acquireErr}), d
}

// wantRefusal fails t unless err wraps sentinel and, still reachable
// through the chain, the store's own error want.
func wantRefusal(t *testing.T, what string, err, sentinel error, want *storeRefusal) {
	t.Helper()
	var got *storeRefusal
	if !errors.Is(err, sentinel) || !errors.As(err, &got) || got != want {
		t.Errorf("%s = %v, want an error wrapping %v and the store's %v", what, err, sentinel, want)
	}
	// The sentinel's words once, and "dlock: " only at the start.
	words := strings.TrimPrefix(sentinel.Error(), "dlock: ")
	if err != nil && (strings.Count(err.Error(), words) != 1 || strings.Count(err.Error(), "dlock: ") != 1) {
		t.Errorf("%s = %q, want %q said once, after one \"dlock: \"", what, err, words)
	}
}

// TestClassifiedAcquireErrors: the adversary is a store that refuses the
// credentials or the write on every Acquire. The driver only says which
// kind its error is; Acquire and TryAcquire return errors wrapping
// ErrDenied or ErrNoSpace, with the store's own error still in the chain.
func TestClassifiedAcquireErrors(t *testing.T) {
	for _, tc := range []struct {
		err      *storeRefusal
		sentinel error
	}{{errNoPerm, dlock.ErrDenied}, {errFull, dlock.ErrNoSpace}} {
		l, _ := newClassifying(memlock.NewStore(), tc.err)
		_, err := l.Acquire(t.Context(), "a")
		wantRefusal(t, "Acquire", err, tc.sentinel, tc.err)
		_, err = l.TryAcquire(t.Context(), "a")
		wantRefusal(t, "TryAcquire", err, tc.sentinel, tc.err)
		l.Close()
	}
}

// TestDeniedRenewalLoss: the adversary is a store that starts refusing
// the holder's renewals (its grant revoked). The lease on the server
// outlives the refusals, so the lock is kept until its loss deadline, as
// for any failed renewal; then Done closes with a cause that wraps
// ErrLost, ErrDenied and the store's error.
func TestDeniedRenewalLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newClassifying(memlock.NewStore(), nil)
		defer l.Close()
		d.mu.Lock()
		d.refreshErr = func(int) error { return errNoPerm }
		d.mu.Unlock()
		const ttl = 3 * time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		<-k.Done()
		cause := context.Cause(k.Context())
		if !errors.Is(cause, dlock.ErrLost) {
			t.Errorf("Cause = %v, want ErrLost", cause)
		}
		wantRefusal(t, "Cause", cause, dlock.ErrDenied, errNoPerm)
		if err := k.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("Refresh after the loss = %v, want ErrNotHeld", err)
		}
	})
}

// TestDeniedRefresh: Lock.Refresh on a store refusing the step returns
// ErrDenied with the store's error.
func TestDeniedRefresh(t *testing.T) {
	l, d := newClassifying(memlock.NewStore(), nil)
	defer l.Close()
	k, err := l.Acquire(t.Context(), "a")
	if err != nil {
		t.Fatalf("Acquire = %v", err)
	}
	defer k.Release(t.Context())
	d.mu.Lock()
	d.refreshErr = func(int) error { return errNoPerm }
	d.mu.Unlock()
	wantRefusal(t, "Refresh", k.Refresh(t.Context()), dlock.ErrDenied, errNoPerm)
}

// TestStoreError checks the mapping backends use for the errors of
// opening a store: nothing to classify, a kind to wrap, and a sentinel
// already there (not wrapped twice).
func TestStoreError(t *testing.T) {
	c := classifyingDriver{}
	notHeld := errors.Join(driver.ErrNotHeld, errNoPerm)
	denied := driver.StoreError(c, errNoPerm)
	for _, tc := range []struct {
		c         driver.Classifier
		err, want error
	}{
		{c, nil, nil},
		{nil, errNoPerm, errNoPerm},
		{c, errLinkReset, errLinkReset},
		{c, notHeld, notHeld},
		{c, denied, denied},
	} {
		if got := driver.StoreError(tc.c, tc.err); got != tc.want {
			t.Errorf("StoreError(%v) = %v, want %v as it is", tc.err, got, tc.want)
		}
	}
	wantRefusal(t, "StoreError(NOPERM)", denied, dlock.ErrDenied, errNoPerm)
	wantRefusal(t, "StoreError(FULL)", driver.StoreError(c, errFull), dlock.ErrNoSpace, errFull)
}

func TestErrorKindString(t *testing.T) {
	for k, want := range map[driver.ErrorKind]string{
		driver.ErrorOther: "other", driver.ErrorTransient: "transient",
		driver.ErrorDenied: "denied", driver.ErrorNoSpace: "no space", 9: "ErrorKind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("ErrorKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestLeadEndsOnDenial: the adversary is a store that refuses every
// campaign (a missing grant). Lead used to campaign again forever, every
// retry interval, hiding the refusal; it now returns it at once. A store
// out of space is not a refusal of the user: Lead keeps campaigning.
func TestLeadEndsOnDenial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newClassifying(memlock.NewStore(), errNoPerm)
		defer l.Close()
		err := l.Lead(t.Context(), "a", func(ctx context.Context) error {
			t.Error("fn ran on a store that refuses every acquisition")
			return nil
		})
		wantRefusal(t, "Lead", err, dlock.ErrDenied, errNoPerm)

		full, _ := newClassifying(memlock.NewStore(), errFull)
		defer full.Close()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err = full.Lead(ctx, "a", func(ctx context.Context) error { return nil })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Lead on a full store = %v, want it to campaign until ctx ends", err)
		}
	})
}
