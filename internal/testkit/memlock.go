package testkit

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/memlock"
)

// MemLocker returns a memlock Locker on store (nil: a store of its own),
// closed when the test ends.
func MemLocker(t testing.TB, store *memlock.Store) *dlock.Locker {
	t.Helper()
	l, err := memlock.New(store)
	if err != nil {
		t.Fatalf("memlock.New = %v, want a Locker", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// MemLockers returns n memlock Lockers, distinct owners, on one new store,
// closed when the test ends.
func MemLockers(t testing.TB, n int) (*memlock.Store, []*dlock.Locker) {
	t.Helper()
	store := memlock.NewStore()
	ls := make([]*dlock.Locker, n)
	for i := range ls {
		ls[i] = MemLocker(t, store)
	}
	return store, ls
}
