package kubelock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
)

// testKillHolder: the adversary is kill -9 of the holder's process. A
// waiter takes the name once it has seen the dead holder's Lease
// unchanged for its lease duration, with a token above the dead one's.
func testKillHolder(t *testing.T, k *testserver.Kube) {
	cs := clientset(t, k, testserver.KubeUser, "")
	name := testkit.UniqueName(t, "kill")
	p, dead := testworker.StartHolder(t, storeURL(t, k, testserver.KubeUser, ""), name, 2*time.Second)
	l := newLocker(t, cs)
	testkit.WantNotAcquired(t, l, name, "while the worker holds it")
	p.Kill(t)
	got := testkit.WantAcquired(t, testkit.AcquireAsync(t.Context(), l, name), name, 30*time.Second)
	if got.Err != nil {
		t.Fatalf("Acquire after the kill = %v", got.Err)
	}
	if tok := got.Lock.Fence(); tok <= dead {
		t.Errorf("token after the kill = %d, want above the dead holder's %d", tok, dead)
	}
	testkit.MustRelease(t, got.Lock)
}

// TestApiserverFaults: the adversaries are a paused apiserver (SIGSTOP)
// for three times the TTL, a killed and restarted one, and a restarted
// etcd under it. The holder through the pause loses its lock (Done
// closes: its renewals could not reach the store); after each fault the
// store serves a new acquisition again, with a token above every earlier
// one (resourceVersions rise across the cluster).
func TestApiserverFaults(t *testing.T) {
	k := startKube(t)
	cs := clientset(t, k, testserver.KubeUser, "")
	faults := []struct {
		name  string
		fault func(t *testing.T)
	}{
		{"pause", func(t *testing.T) { k.Pause(t); time.Sleep(3 * time.Second); k.Resume(t) }},
		{"restart-apiserver", func(t *testing.T) { k.Restart(t) }},
		{"restart-etcd", func(t *testing.T) { k.Etcd.Restart(t) }},
	}
	l := newLocker(t, cs)
	var last uint64
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			name := testkit.UniqueName(t, f.name)
			h := testkit.MustAcquire(t, l, name, dlock.WithTTL(time.Second))
			if h.Fence() <= last {
				t.Errorf("token = %d before the fault, want above %d", h.Fence(), last)
			}
			f.fault(t)
			if f.name == "pause" {
				select {
				case <-h.Done():
				case <-time.After(30 * time.Second):
					t.Errorf("holder's Done still open 30 s after a pause of 3 s with a TTL of 1 s")
				}
			}
			testkit.Retry(t, "a cycle after the fault", func(ctx context.Context) error {
				k2, err := l.TryAcquire(ctx, name+"-after")
				if err != nil {
					return err
				}
				last = k2.Fence()
				return k2.Release(ctx)
			})
			if !testkit.IsClosed(h.Done()) {
				h.Release(t.Context()) // renewed through a short fault: still held
			}
		})
	}
}

// testPartition: the adversary is a network partition between a holder
// and the apiserver (a TCP proxy that blackholes both directions). The
// holder's Done closes, and a waiter on the other side takes the name
// only after that, with a higher token.
func testPartition(t *testing.T, k *testserver.Kube) {
	proxy := testserver.StartProxy(t, strings.TrimPrefix(k.URL(), "https://"))
	cut := clientset(t, k, testserver.KubeUser, "https://"+proxy.Addr())
	name := testkit.UniqueName(t, "partition")
	holder := newLocker(t, cut)
	h := testkit.MustAcquire(t, holder, name, dlock.WithTTL(time.Second))
	waiter := newLocker(t, clientset(t, k, testserver.KubeUser, ""))
	got := testkit.AcquireAsync(t.Context(), waiter, name)
	testkit.WantWaiting(t, got, name)
	proxy.Partition(t)
	w := testkit.WantAcquired(t, got, name, 30*time.Second)
	if w.Err != nil {
		t.Fatalf("waiter's Acquire = %v", w.Err)
	}
	if !testkit.IsClosed(h.Done()) {
		t.Errorf("the waiter acquired while the cut-off holder's Done was open")
	}
	if w.Lock.Fence() <= h.Fence() {
		t.Errorf("waiter's token = %d, want above the cut-off holder's %d", w.Lock.Fence(), h.Fence())
	}
}
