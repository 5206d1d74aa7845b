package etcdlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testworker"
)

func TestMain(m *testing.M) { sessionlocktest.Main(m) }

// startHolder starts a worker process holding name through its own session
// lease and returns it once it holds the lock, with the lock's fencing
// token. The lock's TTL is long: only the lease's end frees the lock.
func startHolder(t *testing.T, addr, name string, session time.Duration) (*testworker.Process, uint64) {
	t.Helper()
	return testworker.StartHolder(t, fmt.Sprintf("etcd://%s?session_ttl=%s", addr, session), name, time.Minute)
}
