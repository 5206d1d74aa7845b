package dlocktest

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// CheckRoundTrip is the property fuzz targets check on a backend, for
// any name, other and meta (two names and metadata from the fuzzer):
//   - input the core refuses (ValidateName, WithMetadata) gets an error
//     wrapping ErrInvalid and takes nothing;
//   - a held name comes back from Inspect on Locker b exactly, with its
//     metadata byte for byte, and b cannot take it;
//   - a different name is independent (no two names share a row, key or
//     path): b takes it while a holds name;
//   - after the releases both names are free.
//
// It fails t on the first violation. a and b must be distinct Lockers on
// the same store.
func CheckRoundTrip(t testing.TB, a, b *dlock.Locker, name, other, meta string) {
	t.Helper()
	ctx := t.Context()
	ka, err := a.TryAcquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithMetadata(meta))
	if driver.ValidateName(name) != nil || !validMetadata(meta) {
		if !errors.Is(err, dlock.ErrInvalid) {
			t.Fatalf("Got(TryAcquire(%q, WithMetadata(%q))) = %v, want ErrInvalid", name, meta, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("TryAcquire(%q, WithMetadata(%q)) = %v, want a lock", name, meta, err)
	}
	defer ka.Release(ctx)
	infos, err := b.Inspect(ctx, name)
	if err != nil && !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("Inspect(%q) = %v", name, err)
	}
	if err == nil && (len(infos) != 1 || infos[0].Name != name || infos[0].Metadata != meta || infos[0].Fence != ka.Fence()) {
		t.Fatalf("Got(Inspect(%q)) = %+v, want one holder with name %q, metadata %q and fence %d", name, infos, name, meta, ka.Fence())
	}
	if k, err := b.TryAcquire(ctx, name); !errors.Is(err, dlock.ErrNotAcquired) {
		if k != nil {
			k.Release(ctx)
		}
		t.Fatalf("Got(TryAcquire(%q) from another Locker while held) = %v, want ErrNotAcquired", name, err)
	}
	if driver.ValidateName(other) == nil && other != name {
		kb, err := b.TryAcquire(ctx, other)
		if err != nil {
			t.Fatalf("TryAcquire(%q) while %q is held = %v, want a lock: the two names collide", other, name, err)
		}
		if err := kb.Release(ctx); err != nil {
			t.Fatalf("Release(%q) = %v", other, err)
		}
	}
	if err := ka.Release(ctx); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
	if k, err := b.TryAcquire(ctx, name); err != nil {
		t.Fatalf("TryAcquire(%q) after its Release = %v, want a lock", name, err)
	} else if err := k.Release(ctx); err != nil {
		t.Fatalf("Release(%q) = %v", name, err)
	}
}

// validMetadata reports whether WithMetadata's documented rule accepts
// meta: valid UTF-8 without NUL bytes, of at most MaxMetadataLen bytes.
func validMetadata(meta string) bool {
	return len(meta) <= driver.MaxMetadataLen && utf8.ValidString(meta) && !strings.ContainsRune(meta, 0)
}
