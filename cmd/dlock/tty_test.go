package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dlock-go/dlock/internal/testkit"
)

// terminal runs dlock with args on a new pseudo-terminal, as a user's
// shell would: the terminal is its controlling terminal and its process
// group has the terminal's foreground.
type terminal struct {
	pty  *os.File
	done <-chan result
	mu   sync.Mutex
	out  bytes.Buffer // everything the terminal showed, guarded by mu
}

func startTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	c := dlockCmd(t, args...)
	f, err := pty.Start(c) // setsid, and the pty as controlling terminal
	if err != nil {
		t.Fatalf("start dlock on a pty: %v", err)
	}
	t.Cleanup(func() { c.Process.Kill(); f.Close() })
	term := &terminal{pty: f}
	go func() { // exits when the pty is closed or hangs up
		buf := make([]byte, 1024)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	done := make(chan result, 1)
	go func() { // exits when dlock does
		timer := time.AfterFunc(time.Minute, func() { c.Process.Kill() })
		err := c.Wait()
		timer.Stop()
		done <- exitResult(err, term.output(), "", 0)
	}()
	term.done = done
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// expect waits for the terminal to show want.
func (term *terminal) expect(t *testing.T, want string) {
	t.Helper()
	if !testkit.Poll(30*time.Second, func() bool { return strings.Contains(term.output(), want) }) {
		t.Fatalf("terminal never showed %q; it showed:\n%s", want, term.output())
	}
}

func (term *terminal) typeIn(t *testing.T, s string) {
	t.Helper()
	if _, err := term.pty.Write([]byte(s)); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

func (term *terminal) wait(t *testing.T) result {
	t.Helper()
	select {
	case r := <-term.done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("dlock still running; the terminal showed:\n%s", term.output())
		return result{}
	}
}

func TestRunInteractiveCommand(t *testing.T) {
	store := sqliteStore(t)
	term := startTerminal(t, "run", "--store", store, "job", "--", "sh", "-c", `printf "type: "; read v; echo "got $v"; exit 7`)
	term.expect(t, "type: ")
	term.typeIn(t, "hello\n")
	term.expect(t, "got hello")
	wantCode(t, term.wait(t), 7, "run of an interactive command exiting 7")
}

func TestRunCtrlCReachesCommand(t *testing.T) {
	store := sqliteStore(t)
	term := startTerminal(t, "run", "--store", store, "job", "--", "sh", "-c", `trap 'echo "caught INT"; exit 5' INT; echo ready; while :; do sleep 0.05; done`)
	term.expect(t, "ready")
	term.typeIn(t, "\x03") // Ctrl-C
	term.expect(t, "caught INT")
	wantCode(t, term.wait(t), 5, "run whose command exits 5 on Ctrl-C")
}
