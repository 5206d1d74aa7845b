package dlocktest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// trickyMetadata are metadata values that break naive encodings: the
// separators backends use, quoting, escapes, SQL, format verbs,
// multi-byte text and the longest value allowed.
var trickyMetadata = []string{
	"",
	"|",
	"a|b|c",
	"owner:1|99|x",
	"line1\nline2\r\n\ttab",
	`"double" 'single' \backslash \\ \n`,
	"'); DELETE FROM dlock_locks; --",
	"%s %d %!x {name} ${HOME} $(id)",
	"ü 漢字 🙂 \u200b",
	" leading and trailing ",
	"\x01\x7f control",
	strings.Repeat("m", driver.MaxMetadataLen),
	strings.Repeat("é", driver.MaxMetadataLen/2),
}

// testMetadataRoundTrip acquires a name with each tricky metadata value
// and requires Inspect, from another Locker, to return it byte for byte;
// values WithMetadata refuses must wrap ErrInvalid and take nothing.
func testMetadataRoundTrip(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	for i, meta := range trickyMetadata {
		name := uniqueName(t, "")
		k, err := a.TryAcquire(t.Context(), name, dlock.WithTTL(10*time.Second), dlock.WithMetadata(meta))
		if err != nil {
			t.Fatalf("TryAcquire(%q, WithMetadata(value %d %.40q)) = %v, want a lock", name, i, meta, err)
		}
		infos, err := b.Inspect(t.Context(), name)
		if errors.Is(err, dlock.ErrUnsupported) {
			testkit.MustRelease(t, k)
			t.Skipf("Inspect: %v", err)
		}
		if err != nil || len(infos) != 1 {
			t.Fatalf("Inspect(%q) = %+v, %v; want one holder", name, infos, err)
		}
		if got := infos[0].Metadata; got != meta {
			t.Errorf("Got(Inspect(%q).Metadata) = %.60q (%d bytes), want %.60q (%d bytes)", name, got, len(got), meta, len(meta))
		}
		testkit.MustRelease(t, k)
	}
	for _, bad := range []string{"nul\x00byte", "\xff\xfe not UTF-8", strings.Repeat("m", driver.MaxMetadataLen+1)} {
		name := uniqueName(t, "")
		k, err := a.TryAcquire(t.Context(), name, dlock.WithMetadata(bad))
		if !errors.Is(err, dlock.ErrInvalid) {
			if k != nil {
				testkit.MustRelease(t, k)
			}
			t.Errorf("Got(TryAcquire with metadata %.40q) = %v, want ErrInvalid", bad, err)
			continue
		}
		if infos, err := b.Inspect(t.Context(), name); err == nil && len(infos) != 0 {
			t.Errorf("Got(Inspect(%q) after refused metadata) = %+v, want nothing held", name, infos)
		}
	}
}
