// Package fencetest checks a fenced store against the rule of package
// fence: every store (fence.Guard in a store of the test's own,
// fence.Update, redislock.Fence, etcdlock.Fence, sqllock.FenceTable) runs
// the same checks, so they cannot drift apart.
package fencetest

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Store is what every fenced store offers.
type Store interface {
	Write(ctx context.Context, resource string, token uint64, value []byte) error
	Read(ctx context.Context, resource string) ([]byte, uint64, error)
}

// Run runs the properties every store has, one subtest each. Each subtest
// uses resources of its own, prefixed by prefix so that runs on one
// server do not meet.
func Run(t *testing.T, s Store, prefix string) {
	t.Helper()
	t.Run("Rule", func(t *testing.T) { testRule(t, s, prefix+"rule") })
	t.Run("InvalidInput", func(t *testing.T) { testInvalid(t, s, prefix+"invalid") })
	t.Run("Names", func(t *testing.T) { testNames(t, s, prefix+"names/") })
	t.Run("Race", func(t *testing.T) { testRace(t, s, prefix+"race") })
}

// MustWrite writes and fails the test on any error.
func MustWrite(t *testing.T, s Store, resource string, token uint64, value string) {
	t.Helper()
	if err := s.Write(t.Context(), resource, token, []byte(value)); err != nil {
		t.Fatalf("Write(%q, %d, %q) = %v, want nil", resource, token, value, err)
	}
}

// WantStored checks what Read returns for resource.
func WantStored(t *testing.T, s Store, resource string, token uint64, value string) {
	t.Helper()
	got, gotToken, err := s.Read(t.Context(), resource)
	if err != nil || gotToken != token || string(got) != value {
		t.Fatalf("Read(%q) = %q, %d, %v, want %q, %d, nil", resource, got, gotToken, err, value, token)
	}
}

// WantForeign checks that the store refuses to write or read resource,
// which holds a value the store did not write, and that the refusal is not
// taken for a stale token.
func WantForeign(t *testing.T, s Store, resource string) {
	t.Helper()
	err := s.Write(t.Context(), resource, 5, []byte("new"))
	if err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("Write(%q) over a value it did not write = %v, want an error that is not ErrStale", resource, err)
	}
	if _, _, err := s.Read(t.Context(), resource); err == nil {
		t.Errorf("Read(%q) of a value it did not write = nil error, want an error", resource)
	}
}

// WantInvalid checks that a store not properly made (without a client)
// refuses to write or read with an error wrapping dlock.ErrInvalid
// instead of panicking.
func WantInvalid(t *testing.T, s Store) {
	t.Helper()
	if err := s.Write(t.Context(), "x", 1, nil); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Write on a store without a client = %v, want ErrInvalid", err)
	}
	if _, _, err := s.Read(t.Context(), "x"); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Read on a store without a client = %v, want ErrInvalid", err)
	}
}

// testRule checks the rule: a token below the stored one is refused and
// changes nothing; an equal or higher one is accepted.
func testRule(t *testing.T, s Store, r string) {
	if got, token, err := s.Read(t.Context(), r); got != nil || token != 0 || err != nil {
		t.Fatalf("Read(%q) before any write = %q, %d, %v, want nil, 0, nil", r, got, token, err)
	}
	MustWrite(t, s, r, 7, "first")
	WantStored(t, s, r, 7, "first")
	MustWrite(t, s, r, 7, "same holder again")
	WantStored(t, s, r, 7, "same holder again")
	MustWrite(t, s, r, 7, "same holder again") // unchanged values (MySQL reports no row changed)
	WantStored(t, s, r, 7, "same holder again")

	err := s.Write(t.Context(), r, 6, []byte("stale"))
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Write(%q, 6) after 7 = %v, want ErrStale", r, err)
	}
	if !strings.Contains(err.Error(), "token 6 is below 7") {
		t.Errorf("Write(%q, 6) after 7 = %q, want it to name both tokens", r, err)
	}
	WantStored(t, s, r, 7, "same holder again")

	MustWrite(t, s, r, 1<<60, "newer") // above 2^53: compared exactly, not as a float
	WantStored(t, s, r, 1<<60, "newer")
	if err := s.Write(t.Context(), r, 1<<60-1, []byte("stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Write(%q, 2^60-1) after 2^60 = %v, want ErrStale", r, err)
	}
	MustWrite(t, s, r, math.MaxInt64, "")
	WantStored(t, s, r, math.MaxInt64, "")

	binary := "\x00\xff\x01 nul and high bytes\x00"
	MustWrite(t, s, r+"/binary", 3, binary)
	WantStored(t, s, r+"/binary", 3, binary)
}

// testInvalid checks that bad input is refused with dlock.ErrInvalid and
// writes nothing.
func testInvalid(t *testing.T, s Store, r string) {
	for _, token := range []uint64{0, math.MaxInt64 + 1, math.MaxUint64} {
		if err := s.Write(t.Context(), r, token, []byte("x")); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Write(%q, %d) = %v, want ErrInvalid", r, token, err)
		}
	}
	if err := s.Write(t.Context(), "", 1, []byte("x")); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf(`Write("", 1) = %v, want ErrInvalid`, err)
	}
	WantStored(t, s, r, 0, "")
}

// testNames checks that names are data, never code or key syntax.
func testNames(t *testing.T, s Store, prefix string) {
	names := []string{
		`x'; DROP TABLE dlock_fenced; --`,
		`"quoted" and \backslash`,
		"{hash}tag",
		"ünïcødé ✓",
		"*?[glob]",
		strings.Repeat("n", 255-len(prefix)),
	}
	for i, n := range names {
		MustWrite(t, s, prefix+n, uint64(i+1), n)
	}
	for i, n := range names {
		WantStored(t, s, prefix+n, uint64(i+1), n)
	}
}
