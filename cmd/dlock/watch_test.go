package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
)

// nextSnapshot returns the lines of the next table status --watch
// printed (without a terminal: tables separated by a blank line), the time
// line first.
func nextSnapshot(t *testing.T, lines <-chan string, what string) []string {
	t.Helper()
	var snap []string
	for {
		l := nextLine(t, lines, what)
		if l == "" {
			return snap
		}
		snap = append(snap, l)
	}
}

// waitSnapshot reads status --watch's tables until one has a row for
// name for which match reports true (given the row's fields, the WAITERS
// column's among them), and returns that row; it fails the test after 30 s.
func waitSnapshot(t *testing.T, lines <-chan string, name, what string, match func(row []string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		last = nextSnapshot(t, lines, what)
		if len(last) == 2 && strings.HasPrefix(last[1], "no locks held on ") {
			continue
		}
		if len(last) < 2 || !strings.Contains(last[1], "WAITERS") {
			t.Fatalf("status --watch table without a WAITERS column:\n%s", strings.Join(last, "\n"))
		}
		for _, l := range last[2:] {
			if row := strings.Fields(l); len(row) > 0 && row[0] == `"`+name+`"` && match(row) {
				return row
			}
		}
	}
	t.Fatalf("status --watch showed no table with %s within 30 s; the last:\n%s", what, strings.Join(last, "\n"))
	return nil
}

func TestStatusWatch(t *testing.T) {
	store := redisStore(t)
	l := testkit.MustOpen(t, store)
	lines, signal, done := startObserve(t, "status", "--watch", "--interval", "0.2", "--store", store, "report")

	// Columns: NAME FENCE LEASE-LEFT OWNER MODE WAITERS HOLDER.
	waitSnapshot(t, lines, "report", "the name free", func(row []string) bool { return row[3] == "(free)" })
	k, err := l.TryAcquire(t.Context(), "report", dlock.WithMetadata("host=h"))
	if err != nil {
		t.Fatal(err)
	}
	row := waitSnapshot(t, lines, "report", "the holder", func(row []string) bool { return row[3] == k.Owner() })
	if len(row) != 7 || row[4] != "exclusive" || row[5] != "0" || row[6] != "host=h" {
		t.Errorf("status --watch row %q, want the exclusive holder with 0 waiters and its metadata", row)
	}

	// A waiter from another process shows in WAITERS.
	ctx, cancel := context.WithCancel(t.Context())
	waiter := make(chan error, 1)
	go func() { // exits when the Acquire returns (cancel ends it)
		k, err := testkit.MustOpen(t, store).Acquire(ctx, "report")
		if err == nil {
			k.Release(t.Context())
		}
		waiter <- err
	}()
	waitSnapshot(t, lines, "report", "one waiter", func(row []string) bool { return row[3] == k.Owner() && row[5] == "1" })
	cancel()
	<-waiter

	testkit.MustRelease(t, k)
	waitSnapshot(t, lines, "report", "the name free again", func(row []string) bool { return row[3] == "(free)" && row[5] == "0" })
	signal(syscall.SIGINT)
	wantCode(t, waitExit(t, done, "status --watch after SIGINT"), 0, "status --watch after SIGINT")
}

func TestStatusWatchAll(t *testing.T) {
	// Every held name, polled; SQLite cannot count waiters.
	store := sqliteStore(t)
	l := testkit.MustOpen(t, store)
	lines, signal, done := startObserve(t, "status", "--watch", "--interval", "0.2", "--store", store)
	k, err := l.TryAcquire(t.Context(), "nightly")
	if err != nil {
		t.Fatal(err)
	}
	row := waitSnapshot(t, lines, "nightly", "the holder", func(row []string) bool { return row[3] == k.Owner() })
	if row[5] != "-" {
		t.Errorf("status --watch row %q on SQLite, want WAITERS -", row)
	}
	testkit.MustRelease(t, k)
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap := nextSnapshot(t, lines, "no lock held")
		if len(snap) == 2 && strings.HasPrefix(snap[1], "no locks held on ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --watch still shows a holder 30 s after the release:\n%s", strings.Join(snap, "\n"))
		}
	}
	signal(syscall.SIGTERM)
	wantCode(t, waitExit(t, done, "status --watch after SIGTERM"), 0, "status --watch after SIGTERM")
}
