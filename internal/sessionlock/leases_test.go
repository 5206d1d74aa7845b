package sessionlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// store records the entries a Leases removes; remove fails while failing
// is set.
type store struct {
	mu      sync.Mutex
	removed []string
	failing bool
}

func (s *store) remove(_ context.Context, e string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return errors.New("store down")
	}
	s.removed = append(s.removed, e)
	return nil
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.removed)
}

func newLeases(t *testing.T, s *store, live func(string) bool) *sessionlock.Leases[string] {
	t.Helper()
	ls := sessionlock.New(sessionlock.Config[string]{Name: "test", Remove: s.remove, Live: live})
	t.Cleanup(func() {
		ls.Close()
		ls.Wait()
	})
	return ls
}

// wantRemovedAt checks, in a synctest bubble, that s's one entry is
// removed after d from now, not a nanosecond earlier.
func wantRemovedAt(t *testing.T, s *store, d time.Duration) {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	synctest.Wait()
	if n := s.count(); n != 0 {
		t.Fatalf("%d entries removed before the deadline, want 0", n)
	}
	time.Sleep(time.Nanosecond)
	synctest.Wait()
	if n := s.count(); n != 1 {
		t.Fatalf("%d entries removed at the deadline, want 1", n)
	}
}

// A lease lasts its TTL from the start its caller gives (the send time of
// the step that found the entry at the head of its queue), not from Hold;
// then its entry is removed.
func TestLeaseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{}
		ls := newLeases(t, s, nil)
		start := time.Now()
		time.Sleep(300 * time.Millisecond) // the step's round trip
		res, err := ls.Hold("o1", "e1", 7, time.Second, start)
		if err != nil || !res.Acquired || res.Fence != 7 || !res.LeaseStart.Equal(start) {
			t.Fatalf("Hold = %+v, %v; want acquired with fence 7 and LeaseStart %v", res, err, start)
		}
		wantRemovedAt(t, s, 700*time.Millisecond)
		if _, _, ok := ls.Held("o1"); ok {
			t.Errorf("Held(o1) after the deadline = true, want false")
		}
		if ls.Busy() {
			t.Errorf("Busy() after the entry was removed = true, want false")
		}
	})
}

// Extend moves the deadline to TTL from the refresh's start, never back,
// and refuses a lease that is gone.
func TestExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{}
		ls := newLeases(t, s, nil)
		if _, err := ls.Hold("o1", "e1", 1, time.Second, time.Now()); err != nil {
			t.Fatalf("Hold = %v", err)
		}
		time.Sleep(800 * time.Millisecond)
		if !ls.Extend("o1", "e1", time.Now()) {
			t.Fatalf("Extend(o1) = false, want true")
		}
		if !ls.Extend("o1", "e1", time.Now().Add(-500*time.Millisecond)) {
			t.Fatalf("Extend(o1) with an older start = false, want true")
		}
		if ls.Extend("o1", "other", time.Now()) {
			t.Errorf("Extend(o1) of another entry = true, want false")
		}
		wantRemovedAt(t, s, time.Second)
		if ls.Extend("o1", "e1", time.Now()) {
			t.Errorf("Extend(o1) after expiry = true, want false")
		}
	})
}

// Hold and Extend refuse an entry whose session is dead.
func TestLive(t *testing.T) {
	dead := false
	ls := newLeases(t, &store{}, func(string) bool { return !dead })
	if _, err := ls.Hold("o1", "e1", 1, time.Second, time.Now()); err != nil {
		t.Fatalf("Hold = %v", err)
	}
	dead = true
	if ls.Extend("o1", "e1", time.Now()) {
		t.Errorf("Extend on a dead session = true, want false")
	}
	if _, err := ls.Hold("o2", "e2", 2, time.Second, time.Now()); !errors.Is(err, sessionlock.ErrGone) {
		t.Errorf("Hold on a dead session = %v, want ErrGone", err)
	}
}

// Lose reports every lost lease without blocking its caller, even when
// nobody reads Losses; Close and Wait then end the reports and close the
// channel, which never receives a send after that.
func TestLoseThenClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{}
		ls := sessionlock.New(sessionlock.Config[string]{Name: "test", Remove: s.remove})
		const n = 40 // more than Losses buffers
		for i := range n {
			owner := string(rune('A' + i))
			if _, err := ls.Hold(owner, "e"+owner, uint64(i), time.Minute, time.Now()); err != nil {
				t.Fatalf("Hold = %v", err)
			}
		}
		cause := errors.New("session gone")
		ls.Lose(func(string) error { return cause }) // returns at once
		synctest.Wait()
		if _, _, ok := ls.Held("A"); ok {
			t.Errorf("Held(A) after Lose = true, want false")
		}
		got := 0
		for range 5 {
			loss := <-ls.Losses()
			if !errors.Is(loss.Err, cause) {
				t.Errorf("Loss.Err = %v, want %v", loss.Err, cause)
			}
			got++
		}
		if es := ls.Close(); len(es) != n {
			t.Errorf("Close returned %d entries to remove, want the %d orphans", len(es), n)
		}
		ls.Wait()
		for range ls.Losses() {
			got++
		}
		if got > n {
			t.Errorf("received %d losses, want at most %d", got, n)
		}
		ls.Lose(func(string) error { return cause }) // closed: nothing to do
		if _, err := ls.Hold("Z", "eZ", 1, time.Minute, time.Now()); !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("Hold after Close = %v, want ErrClosed", err)
		}
	})
}

// An entry whose removal fails stays an orphan until a reap succeeds.
func TestOrphans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &store{failing: true}
		ls := newLeases(t, s, nil)
		if _, err := ls.Hold("o1", "e1", 1, time.Second, time.Now()); err != nil {
			t.Fatalf("Hold = %v", err)
		}
		ls.Orphan("e2")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !ls.Busy() {
			t.Fatalf("Busy() with two orphans the store refused = false, want true")
		}
		s.mu.Lock()
		s.failing = false
		s.mu.Unlock()
		ls.StartReap()
		synctest.Wait()
		if ls.Busy() {
			t.Errorf("Busy() after a reap the store took = true, want false")
		}
		if n := s.count(); n != 2 {
			t.Errorf("%d entries removed, want 2", n)
		}
	})
}

// Call returns ctx's error as soon as ctx ends, whatever f does.
func TestCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := sessionlock.Call(ctx, func() (int, error) { <-release; return 1, nil })
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("Call with a blocked f = %v after %v, want DeadlineExceeded after 1s", err, time.Since(start))
		}
		close(release)
		if v, err := sessionlock.Call(t.Context(), func() (int, error) { return 2, nil }); v != 2 || err != nil {
			t.Errorf("Call = %d, %v; want 2, nil", v, err)
		}
	})
}
