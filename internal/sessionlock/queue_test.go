package sessionlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// fakeQueue is a scripted queue: entries are "q1", "q2", ... in order of
// Join; Join's read and Position answer from script, one answer per call,
// then "head".
type fakeQueue struct {
	ls     *sessionlock.Leases[string]
	script []string // "gone", "transient", "wait" (behind "pred"), "head"

	mu     sync.Mutex
	joined int
	left   []string
	waits  int
}

var errTransient = errors.New("connection down")

func (q *fakeQueue) Join(ctx context.Context, l driver.Lease) (string, driver.Result, string, error) {
	q.mu.Lock()
	q.joined++
	e := "q" + string(rune('0'+q.joined))
	q.mu.Unlock()
	res, pred, err := q.Position(ctx, l, e)
	return e, res, pred, err
}

func (q *fakeQueue) Position(_ context.Context, l driver.Lease, e string) (driver.Result, string, error) {
	q.mu.Lock()
	step := "head"
	if len(q.script) > 0 {
		step, q.script = q.script[0], q.script[1:]
	}
	q.mu.Unlock()
	switch step {
	case "gone":
		return driver.Result{}, "", sessionlock.ErrGone
	case "transient":
		return driver.Result{}, "", errTransient
	case "wait":
		return driver.Result{}, "pred", nil
	}
	res, err := q.ls.Hold(l.Owner, e, 1, l.TTL, time.Now())
	return res, "", err
}

// Wait blocks until ctx ends.
func (q *fakeQueue) Wait(ctx context.Context, _ string) error {
	q.mu.Lock()
	q.waits++
	q.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (q *fakeQueue) Leave(e string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.left = append(q.left, e)
}

func (q *fakeQueue) Classify(err error) driver.ErrorKind {
	if errors.Is(err, errTransient) {
		return driver.ErrorTransient
	}
	return driver.ErrorOther
}

var lease = driver.Lease{Name: "n", Owner: "o", TTL: time.Second}

// A waiter whose entry is gone joins again; one that meets a transient
// error tries again after RetryDelay.
func TestAcquireQueuedRejoinsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{ls: newLeases(t, &store{}, nil), script: []string{"gone", "transient"}}
		start := time.Now()
		res, err := sessionlock.AcquireQueued(t.Context(), q.ls, q, lease)
		if err != nil || !res.Acquired {
			t.Fatalf("AcquireQueued = %+v, %v; want acquired", res, err)
		}
		if q.joined != 3 {
			t.Errorf("joined %d times, want 3 (once more after ErrGone, and after the transient error)", q.joined)
		}
		if d := time.Since(start); d != sessionlock.RetryDelay {
			t.Errorf("AcquireQueued took %v, want one RetryDelay (%v)", d, sessionlock.RetryDelay)
		}
		if len(q.left) != 0 {
			t.Errorf("left %v, want nothing: the lock is held", q.left)
		}
	})
}

// A waiter whose context ends leaves the queue and returns an error that
// wraps ctx.Err() and names the lock.
func TestAcquireQueuedLeavesOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{ls: newLeases(t, &store{}, nil), script: []string{"wait"}}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := sessionlock.AcquireQueued(ctx, q.ls, q, lease)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), `test: acquire "n": `) {
			t.Errorf("AcquireQueued = %v, want `test: acquire \"n\": ...` wrapping DeadlineExceeded", err)
		}
		if len(q.left) != 1 || q.left[0] != "q1" {
			t.Errorf("left %v, want [q1]", q.left)
		}
	})
}

// One attempt that is not first leaves the queue and reports not
// acquired, without an error.
func TestAcquireNotFirst(t *testing.T) {
	q := &fakeQueue{ls: newLeases(t, &store{}, nil), script: []string{"wait"}}
	res, err := sessionlock.Acquire(t.Context(), q.ls, nil, q, lease)
	if err != nil || res.Acquired {
		t.Errorf("Acquire = %+v, %v; want not acquired, no error", res, err)
	}
	if len(q.left) != 1 {
		t.Errorf("left %v, want [q1]", q.left)
	}
}
