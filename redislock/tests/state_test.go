package redislock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/redislock"
)

// TestNothingStaysPerName checks the package documentation's account of
// what a name leaves on the server ("Keys", "Fencing tokens") against a
// load that touches every kind of key: 300 names, exclusive (with queued
// waiters, so queue lists exist), shared and semaphore, each held by two
// Lockers in turn. Once every lock is released, each name keeps exactly
// one key, its tombstone, living at most the clock bound plus one second;
// after that the server holds no key at all. A leak here (a queue list or
// a hash left without expiry) would grow with every name ever locked.
func TestNothingStaysPerName(t *testing.T) {
	srv := testserver.StartRedis(t)
	c := srv.Client(t)
	const bound = 500 * time.Millisecond
	var lockers [2]*dlock.Locker
	for i := range lockers {
		l, err := redislock.New(srv.Client(t), &redislock.Options{ClockBound: bound})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		t.Cleanup(func() { l.Close() })
		lockers[i] = l
	}
	modes := []dlock.Option{dlock.WithTTL(5 * time.Second), dlock.Shared(), dlock.WithLimit(2)}
	var wg sync.WaitGroup
	for i := range 300 {
		name, opt := fmt.Sprintf("state-%d", i), modes[i%3]
		for _, l := range lockers {
			wg.Go(func() {
				k, err := l.Acquire(t.Context(), name, opt)
				if err != nil {
					t.Errorf("Acquire(%q) = %v", name, err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := k.Release(t.Context()); err != nil {
					t.Errorf("Release(%q) = %v", name, err)
				}
			})
		}
	}
	wg.Wait()
	keys, err := c.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatalf("KEYS * = %v", err)
	}
	if len(keys) != 300 {
		t.Errorf("keys after every lock was released = %d, want 300 (one tombstone per name)", len(keys))
	}
	for _, k := range keys {
		if ttl := c.PTTL(t.Context(), k).Val(); ttl <= 0 || ttl > bound+time.Second {
			t.Errorf("PTTL(%q) = %v, want a tombstone living at most the clock bound plus 1 s (%v)", k, ttl, bound+time.Second)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.DBSize(t.Context()).Val() != 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := c.DBSize(t.Context()).Val(); n != 0 {
		t.Errorf("DBSIZE after the tombstones expired = %d, want 0", n)
	}
}
