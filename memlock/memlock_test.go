package memlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/memlock"
)

func harness() dlocktest.Harness {
	store := memlock.NewStore()
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			l, err := memlock.New(store)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		Expire: func(t testing.TB, name string) {
			if !store.Expire(name) {
				t.Fatalf("Expire(%q): not held", name)
			}
		},
		TTL: 300 * time.Millisecond,
	}
}

func TestConformance(t *testing.T) {
	dlocktest.Run(t, harness())
}

func BenchmarkMemlock(b *testing.B) {
	dlocktest.RunBenchmarks(b, harness())
}
