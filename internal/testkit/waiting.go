package testkit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
)

// Starts counts the acquisitions a Locker begins, by name, so that a test
// can wait until a goroutine is inside Acquire instead of sleeping while
// it gets there.
type Starts struct {
	l  *dlock.Locker
	mu sync.Mutex
	n  map[string]int
}

// WatchStarts returns a Starts that counts, from now on, each acquisition
// l begins (hook.AcquireStart: not re-entries, which never wait).
func WatchStarts(l *dlock.Locker) *Starts {
	s := &Starts{l: l, n: map[string]int{}}
	l.AddHook(hook.Hook{AcquireStart: func(_ context.Context, e hook.AcquireStart) context.Context {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n[e.Name]++
		return nil
	}})
	return s
}

func (s *Starts) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}

// WaitInAcquire waits until n acquisitions of name have begun on the
// Locker since WatchStarts and, where the store queues waiters
// (Locker.Waiters), until at least n wait in its queue for name. On a
// store without a queue, a begun Acquire of a held name is inside Acquire
// (trying or waiting), which is all a test can know from outside.
func (s *Starts) WaitInAcquire(t testing.TB, name string, n int) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%d acquisitions of %q begun", n, name), func() bool { return s.count(name) >= n })
	if _, err := s.l.Waiters(t.Context(), name); errors.Is(err, dlock.ErrUnsupported) {
		return
	}
	Eventually(t, fmt.Sprintf("%d waiters queued for %q", n, name), func() bool {
		q, err := s.l.Waiters(t.Context(), name)
		return err == nil && q >= n
	})
}
