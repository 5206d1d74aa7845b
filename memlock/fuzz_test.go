package memlock_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/memlock"
)

// FuzzRoundTrip feeds fuzzed names and metadata through the core's
// validation and a real Locker: refused input wraps ErrInvalid, accepted
// input round-trips through Inspect, and distinct names are independent.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range [][3]string{
		{"a", "b", ""},
		{"job/1", "job:1", "host=web1 pid=42"},
		{"x", "x", "a|b|c"},
		{"", "a", ""},
		{"nul\x00", "ok", ""},
		{"ok", "ok ", "nul\x00meta"},
		{"\xff", "ü", "\xfe"},
		{strings.Repeat("n", driver.MaxNameLen), strings.Repeat("n", driver.MaxNameLen+1), strings.Repeat("m", driver.MaxMetadataLen+1)},
	} {
		f.Add(s[0], s[1], s[2])
	}
	store := memlock.NewStore()
	a, err := memlock.New(store)
	if err != nil {
		f.Fatal(err)
	}
	b, err := memlock.New(store)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close(); b.Close() })
	f.Fuzz(func(t *testing.T, name, other, meta string) {
		dlocktest.CheckRoundTrip(t, a, b, name, other, meta)
	})
}
