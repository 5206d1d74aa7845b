package etcdlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Close while acquisitions are in flight that find the session lease
// revoked: each reports the Locker's held locks lost while Close stops
// the driver. The reports must neither block Close nor be sent on the
// closed losses channel (a panic, or a race under -race).
func TestCloseWhileSessionLost(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	const (
		rounds = 10
		held   = 40 // more than the losses channel buffers
		queued = 20
	)
	for r := range rounds {
		l, err := etcdlock.New(cli, &etcdlock.Options{SessionTTL: time.Minute})
		if err != nil {
			t.Fatalf("etcdlock.New = %v", err)
		}
		for i := range held {
			name := fmt.Sprintf("close-%d/held-%d", r, i)
			if _, err := l.TryAcquire(t.Context(), name); err != nil {
				t.Fatalf("TryAcquire(%q) = %v", name, err)
			}
		}
		// Another client revokes the session lease; the Locker learns
		// of it only from its next request that uses the lease.
		if _, err := cli.Revoke(t.Context(), holderLease(t, cli, fmt.Sprintf("close-%d/held-0", r))); err != nil {
			t.Fatalf("Revoke = %v", err)
		}
		var wg sync.WaitGroup
		for i := range queued {
			// Half with a context that cannot end (the core runs those
			// in the caller's goroutine), half with one that can.
			ctx := context.Background()
			if i%2 == 1 {
				ctx = t.Context()
			}
			wg.Go(func() {
				name := fmt.Sprintf("close-%d/new-%d", r, i)
				if k, err := l.Acquire(ctx, name); err == nil {
					k.Release(t.Context())
				}
			})
		}
		closed := make(chan struct{})
		go func() {
			l.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Close still running after 30s", r)
		}
		wg.Wait()
	}
}
