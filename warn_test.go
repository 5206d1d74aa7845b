package dlock_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/memlock"
)

// The adversary is a store that stops answering while a lock is held (a
// paused server, a partition): its renewals hang. The holder must hear of
// it through Warnings at least 0.4×TTL before Done closes, and the channel
// must close with Done.
func TestWarningBeforeLossWhenStoreStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		const ttl = 3 * time.Second
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		ws := k.Warnings()
		d.mu.Lock()
		d.hangRefresh = true
		d.mu.Unlock()
		acquired := time.Now()
		w, ok := <-ws
		warned := time.Now()
		if !ok || w.Err == nil {
			t.Fatalf("first warning = %+v, %v; want one with an error", w, ok)
		}
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("Done closed before the warning was read")
		}
		if want := acquired.Add(ttl / 2); !warned.Equal(want) {
			t.Errorf("warned %v after the acquisition, want %v (TTL/2)", warned.Sub(acquired), ttl/2)
		}
		if !w.Deadline.Equal(k.Deadline()) {
			t.Errorf("warning's Deadline %v, lock's %v", w.Deadline, k.Deadline())
		}
		<-k.Done()
		lost := time.Now()
		if early := lost.Sub(warned); early < 4*ttl/10 {
			t.Errorf("the warning came %v before Done, want at least 0.4×TTL = %v", early, 4*ttl/10)
		}
		t.Logf("warned %v after acquiring, %v before Done closed (TTL %v): %v", warned.Sub(acquired), lost.Sub(warned), ttl, w.Err)
		for w := range ws { // ends when the channel closes with Done
			if w.Err == nil {
				t.Errorf("a recovery was reported while every renewal hung")
			}
		}
	})
}

// The adversary is a store that refuses two renewals in a row and then
// answers again: the holder hears of the failure, then of the recovery,
// and keeps the lock.
func TestWarningThenRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		refused := errors.New("store busy")
		d.refreshErr = func(call int) error {
			if call <= 2 {
				return refused
			}
			return nil
		}
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		ws := k.Warnings()
		if w := <-ws; !errors.Is(w.Err, refused) {
			t.Fatalf("first warning's Err = %v, want the renewal's error", w.Err)
		}
		w := <-ws
		for w.Err != nil { // the second refusal may come before the recovery
			w = <-ws
		}
		if testkit.IsClosed(k.Done()) {
			t.Fatalf("lock lost although renewals recovered: %v", k.Context().Err())
		}
		if !w.Deadline.Equal(k.Deadline()) {
			t.Errorf("recovery's Deadline %v, lock's %v", w.Deadline, k.Deadline())
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if _, ok := <-ws; ok {
			t.Errorf("Warnings still open after Release")
		}
	})
}

// Warnings asked for after a failure reports it at once; asked for on a
// released handle, it is closed.
func TestWarningsLateAndAfterRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, d := newFaulty(memlock.NewStore(), true)
		defer l.Close()
		d.refreshErr = func(int) error { return errors.New("store busy") }
		k, err := l.Acquire(t.Context(), "a", dlock.WithTTL(3*time.Second))
		if err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		time.Sleep(1100 * time.Millisecond) // past the first renewal, at TTL/3
		select {
		case w := <-k.Warnings():
			if w.Err == nil {
				t.Errorf("late Warnings' first value has no error")
			}
		default:
			t.Errorf("late Warnings has nothing although a renewal failed")
		}
		if err := k.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
		k2 := testkit.MustTryAcquire(t, l, "b", dlock.WithTTL(3*time.Second))
		if err := k2.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if _, ok := <-k2.Warnings(); ok {
			t.Errorf("Warnings of a released handle is open")
		}
	})
}
