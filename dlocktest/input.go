package dlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

func testBadInput(t *testing.T, h Harness) {
	a, b := newLocker(t, h), newLocker(t, h)
	ctx := t.Context()
	badNames := map[string]string{
		"empty":        "",
		"too long":     strings.Repeat("n", driver.MaxNameLen+1),
		"huge":         strings.Repeat("n", 1<<20),
		"invalid utf8": "bad\xff\xfe",
		"NUL byte":     "a\x00b",
	}
	for what, name := range badNames {
		for op, acquire := range map[string]func(context.Context, string, ...dlock.Option) (*dlock.Lock, error){
			"Acquire": a.Acquire, "TryAcquire": a.TryAcquire,
		} {
			if _, err := acquire(ctx, name); !errors.Is(err, dlock.ErrInvalid) {
				t.Errorf("%s(%s name) = %v, want ErrInvalid", op, what, err)
			}
		}
	}
	name := uniqueName(t, "")
	for _, ttl := range []time.Duration{0, -time.Second, driver.MinTTL - 1, driver.MaxTTL + 1} {
		if _, err := a.Acquire(ctx, name, dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrInvalid) {
			t.Errorf("Acquire(WithTTL(%v)) = %v, want ErrInvalid", ttl, err)
		}
	}
	var nilCtx context.Context
	if _, err := a.Acquire(nilCtx, name); !errors.Is(err, dlock.ErrInvalid) {
		t.Errorf("Acquire(nil context) = %v, want ErrInvalid", err)
	}
	if _, err := a.TryAcquire(ctx, name, nil); err != nil {
		t.Errorf("TryAcquire with a nil Option = %v, want it ignored", err)
	} else {
		testkit.WantNotAcquired(t, b, name, "while another owner holds it")
	}

	// Odd but valid names work and stay distinct.
	base := uniqueName(t, "")
	odd := []string{
		base + "{tag}", "{" + base, base + "}", base + " with spaces", base + "/a/b/",
		base + "日本語✓", base + "'; DROP TABLE locks; --", base + "%_*?[]\\",
		base + strings.Repeat("x", driver.MaxNameLen-len(base)),
	}
	for _, n := range odd {
		k, err := a.TryAcquire(ctx, n)
		if err != nil {
			t.Errorf("TryAcquire(%q) = %v, want a lock", n, err)
			continue
		}
		testkit.WantNotAcquired(t, b, n, "while another owner holds it")
		testkit.MustRelease(t, k)
		k2 := testkit.MustTryAcquire(t, b, n)
		testkit.MustRelease(t, k2)
	}
}
