package redlock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/redlock/internal/testhook"
	"github.com/redis/go-redis/v9"
)

// TestRefreshChecksFence: a refresh that carries a token (Lease.Fence)
// extends the lease only if the masters hold it with exactly that token,
// and reports ErrNotHeld for another.
func TestRefreshChecksFence(t *testing.T) {
	cs, drv, l, res := acquiredOnMasters(t)
	right := l
	right.Fence = res.Fence
	if errs := drv.Refresh(t.Context(), []driver.Lease{right}); errs[0] != nil {
		t.Fatalf("Refresh(%q) with its token %d = %v, want nil", l.Name, right.Fence, errs[0])
	}
	for _, f := range []uint64{res.Fence - 1, res.Fence + 1} {
		wrong := l
		wrong.Fence = f
		if errs := drv.Refresh(t.Context(), []driver.Lease{wrong}); !errors.Is(errs[0], driver.ErrNotHeld) {
			t.Fatalf("Refresh(%q) with token %d, held with %d = %v, want ErrNotHeld", l.Name, f, res.Fence, errs[0])
		}
	}
	// The masters' side: two of three keys carry the owner with another
	// token; a refresh with the token the acquisition got is refused.
	key := redlock.Key("", "n")
	for _, c := range cs[:2] {
		v, err := c.Get(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("GET %q = %v, want the lock", key, err)
		}
		owner, _, _ := strings.Cut(v, "|")
		if err := c.Set(t.Context(), key, owner+"|"+strconv.FormatUint(res.Fence+1, 10)+"|", 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if errs := drv.Refresh(t.Context(), []driver.Lease{right}); !errors.Is(errs[0], driver.ErrNotHeld) {
		t.Fatalf("Refresh(%q) with token %d, held on 2 of 3 masters with %d = %v, want ErrNotHeld", l.Name, right.Fence, res.Fence+1, errs[0])
	}
}

// TestRefreshWritesMissingToken: on a master that granted the acquisition
// but missed the write-back of its token (its key still carries token 0),
// a refresh with the token counts that master and writes the token there.
func TestRefreshWritesMissingToken(t *testing.T) {
	cs, drv, l, res := acquiredOnMasters(t)
	key := redlock.Key("", "n")
	token := strconv.FormatUint(res.Fence, 10)
	// Masters 0 and 1 lose the write-back: with one master holding the
	// token, only the fix-up makes a majority.
	for _, c := range cs[:2] {
		v, err := c.Get(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("GET %q = %v, want the lock", key, err)
		}
		owner, rest, _ := strings.Cut(v, "|")
		if got, _, _ := strings.Cut(rest, "|"); got != token {
			t.Fatalf("GET %q = %q, want token %s", key, v, token)
		}
		if err := c.Set(t.Context(), key, owner+"|0|", 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l.Fence = res.Fence
	if errs := drv.Refresh(t.Context(), []driver.Lease{l}); errs[0] != nil {
		t.Fatalf("Refresh(%q) with token %d, written back on 1 of 3 masters = %v, want nil", l.Name, l.Fence, errs[0])
	}
	for i, c := range cs {
		v, _ := c.Get(t.Context(), key).Result()
		if !strings.Contains(v, "|"+token+"|") {
			t.Errorf("GET %q on master %d after Refresh = %q, want token %s", key, i, v, token)
		}
	}
}

// acquiredOnMasters starts three masters and returns their clients, a
// driver on them, and a lease "n" it acquired with the result.
func acquiredOnMasters(t *testing.T) ([]redis.UniversalClient, driver.Driver, driver.Lease, driver.Result) {
	t.Helper()
	cs := clients(t, addrs(startMasters(t, 3)))
	drv, err := testhook.NewDriver(cs, nil)
	if err != nil {
		t.Fatalf("NewDriver = %v, want a driver", err)
	}
	t.Cleanup(func() { drv.Close() })
	l := driver.Lease{Name: "n", Owner: "o:1", TTL: 5 * time.Second}
	res, err := drv.Acquire(t.Context(), l)
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q) = %+v, %v, want acquired", l.Name, res, err)
	}
	return cs, drv, l, res
}
