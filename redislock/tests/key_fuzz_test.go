package redislock_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redislock"
)

// FuzzKey: distinct valid names get distinct keys, every key starts with
// its prefix, and the Cluster hash tag (between the first '{' and the
// first '}' after it) is the whole escaped name, so all of a name's keys
// share one slot and no name reaches into another's.
func FuzzKey(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {"{x}", "%7Bx%7D"}, {"a}b", "a%7Db"}, {"%", "%25"}, {"job/1", "job:1"}, {"ü", "\u00fc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if driver.ValidateName(a) != nil || driver.ValidateName(b) != nil {
			return
		}
		ka, kb := redislock.Key("", a), redislock.Key("", b)
		if (a == b) != (ka == kb) {
			t.Fatalf("Key(%q) = %q, Key(%q) = %q: distinct names must have distinct keys", a, ka, b, kb)
		}
		for _, k := range []string{ka, kb} {
			if !strings.HasPrefix(k, redislock.DefaultPrefix) {
				t.Fatalf("Key = %q, want prefix %q", k, redislock.DefaultPrefix)
			}
			open := strings.IndexByte(k, '{')
			end := strings.IndexByte(k[open+1:], '}')
			if open < 0 || end < 0 || open+1+end != len(k)-1 {
				t.Fatalf("Key = %q: the hash tag must be the whole escaped name, up to the key's end", k)
			}
		}
	})
}
