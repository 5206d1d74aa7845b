package dlocktest

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// goroutines is a snapshot of the process's goroutines: their stacks by
// goroutine id. dlocktest finds what a Locker leaves behind with it, so
// that the suite needs nothing beyond the standard library.
type goroutines map[uint64]string

// snapshot returns the goroutines running now and the caller's id
// (runtime.Stack lists the caller's goroutine first).
func snapshot() (goroutines, uint64) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := goroutines{}
	var self uint64
	for i, stack := range bytes.Split(buf, []byte("\n\n")) {
		// "goroutine 42 [chan receive]:\n" then the frames.
		head, _, _ := bytes.Cut(stack, []byte(" ["))
		id, err := strconv.ParseUint(string(bytes.TrimPrefix(head, []byte("goroutine "))), 10, 64)
		if err == nil {
			gs[id] = string(stack)
		}
		if i == 0 {
			self = id
		}
	}
	return gs, self
}

// topFunction returns the function a goroutine's stack is in.
func topFunction(stack string) string {
	_, frames, _ := strings.Cut(stack, "\n")
	fn, _, _ := strings.Cut(frames, "\n")
	if i := strings.LastIndex(fn, "("); i > 0 {
		fn = fn[:i]
	}
	return fn
}

// leftSince returns the stacks of the goroutines running now that were
// not in base, but those (and the caller's own) whose top function is in
// ignore.
func leftSince(base goroutines, ignore ...string) []string {
	var left []string
	now, self := snapshot()
	for id, stack := range now {
		if _, old := base[id]; old || id == self {
			continue
		}
		if top := topFunction(stack); !contains(ignore, top) {
			left = append(left, stack)
		}
	}
	return left
}

// waitLeft is leftSince, looked at again for up to d while anything is
// left: goroutines take a moment to return after what they wait on ends.
func waitLeft(d time.Duration, base goroutines, ignore ...string) []string {
	left := leftSince(base, ignore...)
	for deadline := time.Now().Add(d); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		left = leftSince(base, ignore...)
	}
	return left
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
