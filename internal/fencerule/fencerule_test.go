package fencerule_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/fencerule"
)

// TestPlainName checks PlainName against the regular expressions it
// replaces, on names at the edges of each rule.
func TestPlainName(t *testing.T) {
	unqualified := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	qualified := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)
	long := strings.Repeat("a", 63)
	for _, name := range []string{
		"", "a", "_", "A9_z", "9a", "a-b", "a b", "ä", "a;", `"a"`, "a\x00",
		long, long + "a", "s.t", long + "." + long, long + "a.t", "s." + long + "a",
		".t", "s.", "s..t", "a.b.c", "s.9t",
	} {
		if got, want := fencerule.PlainName(name, false), unqualified.MatchString(name); got != want {
			t.Errorf("PlainName(%q, false) = %v, want %v", name, got, want)
		}
		if got, want := fencerule.PlainName(name, true), qualified.MatchString(name); got != want {
			t.Errorf("PlainName(%q, true) = %v, want %v", name, got, want)
		}
	}
}
