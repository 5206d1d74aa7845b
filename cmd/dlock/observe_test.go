package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// startObserve starts dlock with args (an observe command) and returns
// its stdout line by line, and its result once it exits.
func startObserve(t *testing.T, args ...string) (lines <-chan string, signal func(syscall.Signal), done <-chan result) {
	t.Helper()
	c := dlockCmd(t, args...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatalf("start dlock: %v", err)
	}
	t.Cleanup(func() { c.Process.Kill() })
	ch := make(chan string, 100)
	res := make(chan result, 1)
	go func() { // exits when the process does
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
		err := c.Wait()
		res <- exitResult(err, "", errb.String(), 0)
	}()
	return ch, func(sig syscall.Signal) { c.Process.Signal(sig) }, res
}

// nextLine returns the next line observe printed, and fails the test if
// none comes within 30 s (observe on SQLite polls every 250 ms).
func nextLine(t *testing.T, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("observe exited before printing %s", what)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("observe printed no line for %s within 30 s", what)
	}
	return ""
}

// holderText is how observe prints a shared holder k with metadata meta.
func holderText(k *dlock.Lock, meta string) string {
	return fmt.Sprintf("fence=%d owner=%s mode=shared metadata=%q", k.Fence(), k.Owner(), meta)
}

func TestObserve(t *testing.T) {
	store := sqliteStore(t)
	l := testkit.MustOpen(t, store) // creates the store's table
	text, signalText, textDone := startObserve(t, "observe", "--store", store, "report")
	js, signalJSON, jsonDone := startObserve(t, "observe", "--store", store, "--json", "report")

	// wantText reads observe's next line and checks it lists want, after
	// a time and the name.
	wantText := func(what, want string) {
		t.Helper()
		line := nextLine(t, text, what)
		ts, rest, _ := strings.Cut(line, " ")
		if _, err := time.Parse(observeTime, ts); err != nil {
			t.Errorf("observe line %q does not start with a time: %v", line, err)
		}
		if rest != `"report" `+want {
			t.Errorf("observe printed %q for %s, want %q", rest, what, `"report" `+want)
		}
	}
	// wantJSON reads observe --json's next line and checks its holders'
	// fences.
	wantJSON := func(what string, fences ...uint64) {
		t.Helper()
		line := nextLine(t, js, what)
		var c struct {
			Time    string
			Name    string
			Holders []struct {
				Fence  uint64 `json:"fence,string"`
				Shared bool
				Limit  *int
			}
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("observe --json printed %q for %s: %v", line, what, err)
		}
		got := []uint64{}
		for _, h := range c.Holders {
			got = append(got, h.Fence)
			if !h.Shared || h.Limit == nil || *h.Limit != 0 {
				t.Errorf("observe --json holder %+v for %s, want shared and limit 0", h, what)
			}
		}
		if c.Name != "report" || c.Time == "" || fmt.Sprint(got) != fmt.Sprint(fences) || c.Holders == nil {
			t.Errorf("observe --json printed %s for %s, want holders with fences %v", line, what, fences)
		}
	}

	wantText("the free name", "free")
	wantJSON("the free name")
	k1, err := l.TryAcquire(t.Context(), "report", dlock.Shared(), dlock.WithMetadata("reader 1"))
	if err != nil {
		t.Fatal(err)
	}
	wantText("one reader", holderText(k1, "reader 1"))
	wantJSON("one reader", k1.Fence())
	k2, err := testkit.MustOpen(t, store).TryAcquire(t.Context(), "report", dlock.Shared(), dlock.WithMetadata("reader 2"))
	if err != nil {
		t.Fatal(err)
	}
	wantText("two readers", holderText(k1, "reader 1")+"; "+holderText(k2, "reader 2"))
	wantJSON("two readers", k1.Fence(), k2.Fence())
	if err := k1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantText("the first reader gone", holderText(k2, "reader 2"))
	wantJSON("the first reader gone", k2.Fence())
	if err := k2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantText("the name free again", "free")
	wantJSON("the name free again")

	signalText(syscall.SIGINT)
	signalJSON(syscall.SIGTERM)
	for _, done := range []<-chan result{textDone, jsonDone} {
		wantCode(t, waitExit(t, done, "observe after a signal"), 0, "observe after a signal")
	}
}

// waitExit returns the result of the dlock process behind done, and fails
// the test if it does not exit within 30 s.
func waitExit(t *testing.T, done <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still running after 30 s", what)
		return result{}
	}
}

func TestObserveStoreStops(t *testing.T) {
	pg := testserver.StartPostgres(t)
	store := "postgres://" + strings.TrimPrefix(pg.DSN(), "postgres://")
	testkit.MustOpen(t, store) // creates the store's table
	lines, _, done := startObserve(t, "observe", "--store", store, "--connect-timeout", "1", "job")
	nextLine(t, lines, "the free name")
	pg.Pause(t) // the store stops answering
	defer pg.Resume(t)
	select {
	case r := <-done:
		wantCode(t, r, exitStore, "observe whose store stopped answering")
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || !strings.Contains(r.stderr, "no answer within 1s") {
			t.Errorf("stderr = %q, want one line saying the store did not answer", r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("observe still going 30 s after its store stopped answering")
	}
}
