package zklock_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/zklock"
)

// FuzzKey: distinct valid names get distinct znodes, each one plain path
// segment right under the prefix (never "." or "..", never a '/' that
// would climb or descend the tree).
func FuzzKey(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {".", ".."}, {"a/b", "a%2Fb"}, {"../x", "x"}, {"ü", "\u00fc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if driver.ValidateName(a) != nil || driver.ValidateName(b) != nil {
			return
		}
		const prefix = "/locks"
		ka, kb := zklock.Key(prefix, a), zklock.Key(prefix, b)
		if (a == b) != (ka == kb) {
			t.Fatalf("Key(%q) = %q, Key(%q) = %q: distinct names must have distinct znodes", a, ka, b, kb)
		}
		for _, k := range []string{ka, kb} {
			seg, ok := strings.CutPrefix(k, prefix+"/")
			if !ok || seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "/\x00") {
				t.Fatalf("Key = %q: want one plain path segment under %q", k, prefix)
			}
		}
	})
}
