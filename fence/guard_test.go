package fence_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/fencerule/fencetest"
)

// guarded is a store of values in the process, one Guard per resource.
type guarded struct {
	mu sync.Mutex
	m  map[string]*guardedValue
}

type guardedValue struct {
	guard fence.Guard
	mu    sync.Mutex // for Read, which must not go through the Guard
	value []byte
	token uint64
}

func (s *guarded) entry(resource string) *guardedValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]*guardedValue)
	}
	e := s.m[resource]
	if e == nil {
		e = &guardedValue{}
		s.m[resource] = e
	}
	return e
}

func (s *guarded) Write(ctx context.Context, resource string, token uint64, value []byte) error {
	if resource == "" {
		return dlock.ErrInvalid
	}
	e := s.entry(resource)
	return e.guard.Do(token, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.value, e.token = append([]byte{}, value...), token
		return nil
	})
}

func (s *guarded) Read(ctx context.Context, resource string) ([]byte, uint64, error) {
	e := s.entry(resource)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.value, e.token, nil
}

func TestGuard(t *testing.T) {
	fencetest.Run(t, &guarded{}, "")
	t.Run("Do", testGuardDo)
}

// testGuardDo checks what Do does with fn: not called when stale, its
// error returned, the token kept even when it fails.
func testGuardDo(t *testing.T) {
	var g fence.Guard
	if got := g.Fence(); got != 0 {
		t.Fatalf("Fence() of a zero Guard = %d, want 0", got)
	}
	boom := errors.New("boom")
	if err := g.Do(5, func() error { return boom }); err != boom {
		t.Fatalf("Do(5, failing fn) = %v, want boom", err)
	}
	if got := g.Fence(); got != 5 {
		t.Fatalf("Fence() after Do(5) failed in fn = %d, want 5", got)
	}
	called := false
	if err := g.Do(4, func() error { called = true; return nil }); !errors.Is(err, fence.ErrStale) || called {
		t.Fatalf("Do(4) after 5 = %v, called %v, want ErrStale, not called", err, called)
	}
	if err := g.Do(5, nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Fatalf("Do(5, nil) = %v, want ErrInvalid", err)
	}
	if err := g.Do(6, func() error { called = true; return nil }); err != nil || !called {
		t.Fatalf("Do(6) after 5 = %v, called %v, want nil, called", err, called)
	}
	if got := g.Fence(); got != 6 {
		t.Fatalf("Fence() after Do(6) = %d, want 6", got)
	}
}
