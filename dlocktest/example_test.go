package dlocktest_test

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/memlock"
)

// A backend's conformance test: a Harness that makes Lockers on the store
// under test and deletes a lock behind its holder's back. This one is
// memlock's; a backend's own test looks the same with its constructor.
func Example() {
	testConformance := func(t *testing.T) {
		store := memlock.NewStore()
		dlocktest.Run(t, dlocktest.Harness{
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
		})
	}
	_ = testConformance // in a _test.go file: func TestConformance(t *testing.T)
}
