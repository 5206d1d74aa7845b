package etcdlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestInspectRemaining: Inspect reports the lease left on the holder's
// session (what dlock status shows as LEASE LEFT), for one name and for
// every name. The adversary is a status that says "unknown" although the
// server knows the lease's time to live.
func TestInspectRemaining(t *testing.T) {
	const session = 30 * time.Second
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	l := newLocker(t, cli, &etcdlock.Options{SessionTTL: session})
	k := testkit.MustAcquire(t, l, "n")
	defer testkit.MustRelease(t, k)
	for _, names := range [][]string{{"n"}, nil} {
		infos, err := l.Inspect(t.Context(), names...)
		if err != nil || len(infos) != 1 {
			t.Fatalf("Inspect(%q) = %+v, %v; want one holder", names, infos, err)
		}
		if got := infos[0].Remaining; got <= 0 || got > session {
			t.Errorf("Inspect(%q).Remaining = %v, want the session's lease left, in (0, %v]", names, got, session)
		}
	}
}
