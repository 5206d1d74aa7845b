package sessionlocktest

import (
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
)

// RequestCounter counts the requests a client sends to its store, by
// kind. It is safe for concurrent use.
type RequestCounter struct {
	mu sync.Mutex
	by map[string]int
}

// Add counts one request of kind.
func (c *RequestCounter) Add(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = make(map[string]int)
	}
	c.by[kind]++
}

// Take returns the requests counted since the last Take, in all and by
// kind, and starts again from zero.
func (c *RequestCounter) Take() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.by {
		n += v
	}
	by := c.by
	c.by = nil
	return n, by
}

// TestRequestsPerAcquire checks that an uncontended TryAcquire+Release on
// l costs want requests, as c counts them, for an exclusive hold, a
// shared one and a permit alike. prepare, if not nil, is called after the
// first acquisition of each name, before counting.
func TestRequestsPerAcquire(t *testing.T, l *dlock.Locker, c *RequestCounter, want int, prepare func(t *testing.T, name string)) {
	for _, m := range []struct {
		what string
		opts []dlock.Option
	}{
		{"exclusive", nil},
		{"shared", []dlock.Option{dlock.Shared()}},
		{"permit", []dlock.Option{dlock.WithLimit(4)}},
	} {
		name := "cost/" + t.Name() + "/" + m.what
		once := func() {
			k, err := l.TryAcquire(t.Context(), name, m.opts...)
			if err != nil {
				t.Fatalf("TryAcquire(%q) %s = %v", name, m.what, err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("Release(%q) = %v", name, err)
			}
		}
		once() // sets up the session and the name's parent, where there are some
		if prepare != nil {
			prepare(t, name)
		}
		c.Take()
		const rounds = 20
		for range rounds {
			once()
		}
		n, by := c.Take()
		t.Logf("%s TryAcquire+Release: %.2f requests (%v)", m.what, float64(n)/rounds, by)
		if n != want*rounds {
			t.Errorf("%s TryAcquire+Release costs %.2f requests, want %d", m.what, float64(n)/rounds, want)
		}
	}
}
