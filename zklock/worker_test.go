package zklock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testworker"
)

func TestMain(m *testing.M) { sessionlocktest.Main(m) }

// startHolder starts a worker process holding name through its own session
// and returns it once it holds the lock, with the lock's fencing token.
// The lease is long: only the session's end frees the lock.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*testworker.Process, uint64) {
	t.Helper()
	return testworker.StartHolder(t, fmt.Sprintf("zk://%s?session_timeout=%s", addr, session), name, time.Minute)
}
