package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// A connection to ZooKeeper that goes silent (the adversary: a partition,
// through the freezer): the lock's Warnings yields a value with an error
// before its Done closes. The lock's TTL is below the session timeout, so
// its renewals (exists requests on the silent connection) stop being
// confirmed first.
func TestWarningBeforeLoss(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	f := &freezer{}
	conn := connect(t, z.Addr(), sessionTimeout, f)
	l := newLocker(t, conn)
	const ttl = 2 * time.Second
	k, err := l.TryAcquire(t.Context(), "warn/"+t.Name(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire = %v", err)
	}
	ws := k.Warnings()
	f.set(true)
	cut := time.Now()
	warned := waitWarning(t, k, ws, 2*sessionTimeout)
	select {
	case <-k.Done():
	case <-time.After(2 * sessionTimeout):
		t.Fatalf("Done still open %v after the partition", 2*sessionTimeout)
	}
	done := time.Now()
	t.Logf("TTL %v, session timeout %v: warning %v after the partition, Done %v after it: the warning came %v before Done",
		ttl, sessionTimeout, warned.Sub(cut), done.Sub(cut), done.Sub(warned))
	f.set(false)
}

// waitWarning waits up to limit for a warning with an error on ws, which
// must come while k's Done is still open, and returns when it came.
func waitWarning(t *testing.T, k *dlock.Lock, ws <-chan dlock.Warning, limit time.Duration) time.Time {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case w, ok := <-ws:
			at := time.Now()
			switch {
			case !ok:
				t.Fatalf("Warnings closed (Done closed) before any warning with an error")
			case w.Err == nil:
				continue
			}
			select {
			case <-k.Done():
				t.Fatalf("the warning %v came after Done closed", w.Err)
			default:
			}
			return at
		case <-timeout:
			t.Fatalf("no warning %v after the partition", limit)
		}
	}
}
