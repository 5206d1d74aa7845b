package dlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/memlock"
)

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", `dlock: bad store URL: "" has no scheme`},
		{"localhost:6379", `dlock: bad store URL: unknown scheme "localhost"`},
		{"nosuch://host", `dlock: bad store URL: unknown scheme "nosuch" (registered: mem)`},
		{"redis://host", `dlock: bad store URL: scheme "redis" needs its backend: import _ "github.com/dlock-go/dlock/redislock" (registered: mem)`},
		{"postgres://u:s3cret@h/db", `dlock: bad store URL: scheme "postgres" needs its backend: import _ "github.com/dlock-go/dlock/sqllock/postgres"`},
		{"redis://user:s3cret@host:bad", `dlock: bad store URL: cannot parse "redis://user:xxxxx@host:bad": invalid port ":bad" after host`},
		{"mem://?ttl=1s", `dlock: open mem://?ttl=1s: bad store URL: unknown parameter "ttl" for mem:// (known: none)`},
		{"mem://%zz", `dlock: bad store URL: cannot parse "mem://%zz"`},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if err == nil || !errors.Is(err, dlock.ErrBadURL) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want an ErrBadURL starting %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", tc.url, err)
		}
	}
}

func TestOpenMem(t *testing.T) {
	a, err := dlock.Open(t.Context(), "mem://shared")
	if err != nil {
		t.Fatalf("Open(mem://shared) = %v", err)
	}
	defer a.Close()
	b, _ := dlock.Open(t.Context(), "mem://shared")
	defer b.Close()
	other, _ := dlock.Open(t.Context(), "mem://other")
	defer other.Close()
	k, err := a.TryAcquire(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(t.Context())
	if _, err := b.TryAcquire(t.Context(), "x"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryAcquire on the same mem:// store = %v, want ErrNotAcquired", err)
	}
	if k2, err := other.TryAcquire(t.Context(), "x"); err != nil {
		t.Errorf("TryAcquire on another mem:// store = %v, want a lock", err)
	} else {
		k2.Release(t.Context())
	}
}
