package redislock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
)

// serverCommands sums every command's calls in INFO commandstats, the
// commands scripts run inside the server included, but not INFO itself
// nor a connection's setup.
func serverCommands(t *testing.T, client *redis.Client) map[string]int {
	t.Helper()
	info, err := client.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		switch name {
		case "info", "hello", "client", "client|setinfo", "select", "auth":
			continue
		}
		m[name], _ = strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
	}
	return m
}

func commandsSince(t *testing.T, client *redis.Client, before map[string]int) (int, map[string]int) {
	t.Helper()
	total, d := 0, make(map[string]int)
	for k, v := range serverCommands(t, client) {
		if n := v - before[k]; n != 0 {
			d[k] = n
			total += n
		}
	}
	return total, d
}

// TestExclusiveCost counts the server commands (script calls and the
// commands they run) of an uncontended exclusive TryAcquire, Refresh and
// Release on a name never used in shared or semaphore mode: the mutex's
// fast path, which shared holds and semaphores must not make dearer.
func TestExclusiveCost(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	l := newLocker(t, client)
	const name, rounds = "cost", 20
	// Warm up: every script loaded, the name's tombstone left.
	k := dlocktest.MustTryAcquire(t, l, name)
	if err := k.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh(%q) = %v", name, err)
	}
	dlocktest.MustRelease(t, k)
	before := serverCommands(t, client)
	for range rounds {
		k = dlocktest.MustTryAcquire(t, l, name)
		if err := k.Refresh(t.Context()); err != nil {
			t.Fatalf("Refresh(%q) = %v", name, err)
		}
		dlocktest.MustRelease(t, k)
	}
	total, by := commandsSince(t, client, before)
	t.Logf("%d server commands for %d exclusive acquire+refresh+release rounds: %v", total, rounds, by)
	const want = 11 // acquire: EVALSHA GET EXISTS SET; refresh: EVALSHA GET PEXPIRE; release: EVALSHA GET EXISTS SET
	if total != want*rounds {
		t.Errorf("server commands per exclusive acquire+refresh+release = %.2f, want %d", float64(total)/rounds, want)
	}
}

// TestExclusiveHandoffCost counts the server commands of one exclusive
// handoff: a holder, a waiter that queues, the release that hands the
// name over, the waiter's confirmation and its release.
func TestExclusiveHandoffCost(t *testing.T) {
	r := testserver.StartRedis(t)
	client := r.Client(t)
	a, b := newLocker(t, client), newLocker(t, client)
	const name = "handoff-cost"
	// Warm up: scripts loaded, b's grant channel subscribed.
	k := dlocktest.MustTryAcquire(t, a, name)
	got := dlocktest.AcquireAsync(t.Context(), b, name, dlock.WithTTL(time.Minute))
	eventually(t, "waiter queued", func() bool { return queueLen(t, client, name) == 1 })
	dlocktest.MustRelease(t, k)
	dlocktest.MustRelease(t, dlocktest.WantAcquired(t, got, name, time.Minute).Lock)

	k = dlocktest.MustTryAcquire(t, a, name)
	before := serverCommands(t, client)
	got = dlocktest.AcquireAsync(t.Context(), b, name, dlock.WithTTL(time.Minute))
	eventually(t, "waiter queued", func() bool { return queueLen(t, client, name) == 1 })
	dlocktest.MustRelease(t, k)
	dlocktest.MustRelease(t, dlocktest.WantAcquired(t, got, name, time.Minute).Lock)
	total, by := commandsSince(t, client, before)
	total -= by["llen"] // the test's own polling
	delete(by, "llen")
	t.Logf("%d server commands for one exclusive handoff (queue, release to the waiter, confirm, release): %v", total, by)
	// Measured before shared holds and semaphores existed (5f3fc4d). A
	// waiter's heartbeat (every second here) would add a script call.
	const want = 27
	if total > want {
		t.Errorf("server commands per exclusive handoff = %d, want at most %d", total, want)
	}
}
