package dlocktest

import (
	"strings"
	"testing"
	"time"
)

// TestLeftSinceFindsALeak attacks the suite's own leak finder with the
// leak it exists to catch: goroutines started after the snapshot and
// still blocked must be reported, each with its stack, and a goroutine
// whose top function is ignored must not; once they return, nothing is
// left.
func TestLeftSinceFindsALeak(t *testing.T) {
	before, _ := snapshot()
	stop := make(chan struct{})
	for range 3 {
		go leakForTest(stop)
	}
	left := waitLeft(200*time.Millisecond, before)
	if len(left) != 3 {
		t.Fatalf("leftSince after 3 blocked goroutines = %d stacks, want 3:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	if !strings.Contains(left[0], "leakForTest") {
		t.Errorf("a leaked goroutine's stack = %q, want it to name leakForTest", left[0])
	}
	if ignored := leftSince(before, "github.com/dlock-go/dlock/dlocktest.leakForTest"); len(ignored) != 0 {
		t.Errorf("leftSince ignoring leakForTest = %d stacks, want 0:\n%s", len(ignored), strings.Join(ignored, "\n\n"))
	}
	close(stop)
	if left := waitLeft(5*time.Second, before); len(left) != 0 {
		t.Errorf("leftSince after the goroutines returned = %d stacks, want 0:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

func leakForTest(stop chan struct{}) { <-stop }
