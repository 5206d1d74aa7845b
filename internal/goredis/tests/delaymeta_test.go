package luascript_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/goredis/delaymeta"
)

// TestDelayMeta: the adversary is user metadata that looks like a stored
// delay, or a stored field an older version wrote: only a field that
// Encode wrote with a delay decodes to one.
func TestDelayMeta(t *testing.T) {
	for _, tc := range []struct {
		meta  string
		delay time.Duration
	}{
		{"", 0}, {"host=a pid=1", 0}, {"", 2 * time.Second}, {"x\xffy", 0}, {"|a|b", 1500 * time.Millisecond},
	} {
		s := delaymeta.Encode(tc.meta, tc.delay)
		if tc.delay == 0 && s != tc.meta {
			t.Errorf("Encode(%q, 0) = %q, want the metadata unchanged", tc.meta, s)
		}
		if d, m := delaymeta.Decode(s); d != tc.delay || m != tc.meta {
			t.Errorf("Decode(Encode(%q, %v)) = %v, %q", tc.meta, tc.delay, d, m)
		}
	}
	for _, s := range []string{"\xff", "\xffx\xffm", "\xff-5\xffm", "é"} {
		if d, m := delaymeta.Decode(s); d != 0 || m != s {
			t.Errorf("Decode(%q) = %v, %q; want no delay and the field unchanged", s, d, m)
		}
	}
}
