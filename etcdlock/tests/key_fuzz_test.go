package etcdlock_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
)

// FuzzKey: a name's keys are read by the prefix Key returns, so no name's
// prefix may be a prefix of another's (a range read of one would see the
// other's holders), and every key stays under the Locker's prefix.
func FuzzKey(f *testing.F) {
	for _, s := range [][2]string{{"a", "a/b"}, {"a", "ab"}, {"a%2Fb", "a/b"}, {"%", "%25"}, {"ü", "\u00fc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if driver.ValidateName(a) != nil || driver.ValidateName(b) != nil {
			return
		}
		ka, kb := etcdlock.Key("", a), etcdlock.Key("", b)
		if a != b && (strings.HasPrefix(ka, kb) || strings.HasPrefix(kb, ka)) {
			t.Fatalf("Key(%q) = %q, Key(%q) = %q: one name's range would hold the other's keys", a, ka, b, kb)
		}
		if a == b && ka != kb {
			t.Fatalf("Key(%q) is not stable: %q, %q", a, ka, kb)
		}
		for _, k := range []string{ka, kb} {
			if !strings.HasPrefix(k, etcdlock.DefaultPrefix) {
				t.Fatalf("Key = %q, want prefix %q", k, etcdlock.DefaultPrefix)
			}
		}
	})
}
