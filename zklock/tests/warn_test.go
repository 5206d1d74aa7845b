package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
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
	warned, done := testkit.WarnedBeforeDone(t, k, ws, 2*sessionTimeout)
	t.Logf("TTL %v, session timeout %v: warning %v after the partition, Done %v after it: the warning came %v before Done",
		ttl, sessionTimeout, warned.Sub(cut), done.Sub(cut), done.Sub(warned))
	f.set(false)
}
