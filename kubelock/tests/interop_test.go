package kubelock_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// elector is a client-go LeaderElector on a Lease, with a 4 s lease as
// the issue measured it, and what it did.
type elector struct {
	le      *leaderelection.LeaderElector
	stop    context.CancelFunc
	led     chan struct{} // closed when it starts leading
	stopped chan struct{} // closed when Run has returned
}

// startElector runs a client-go LeaderElector for the Lease name as
// identity; leaders counts the leaders acting at once (both libraries').
// It releases the Lease when stopped (ReleaseOnCancel), as a rolling
// update's old replica would. Each of gone, when it reports true as
// client-go starts leading, marks a leader that stopped acting.
func startElector(t *testing.T, cs kubernetes.Interface, name, identity string, leaders *atomic.Int32, gone ...func() bool) *elector {
	t.Helper()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	e := &elector{led: make(chan struct{}), stopped: make(chan struct{})}
	var err error
	e.le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   4 * time.Second,
		RenewDeadline:   3 * time.Second,
		RetryPeriod:     500 * time.Millisecond,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				for _, g := range gone {
					if g() {
						leaders.Add(-1)
					}
				}
				if n := leaders.Add(1); n != 1 {
					t.Errorf("client-go %s started leading with %d leaders acting", identity, n)
				}
				close(e.led)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatalf("leaderelection.NewLeaderElector = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go func() {
		defer close(e.stopped)
		e.le.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-e.stopped })
	return e
}

// renewals waits until the Lease of name has been written n more times
// (by its holder's renewals) and returns.
func renewals(t *testing.T, cs kubernetes.Interface, name string, n int) {
	t.Helper()
	last := getLease(t, cs, name).ResourceVersion
	for seen := 0; seen < n; {
		testkit.Eventually(t, "a renewal of the lease", func() bool {
			rv := getLease(t, cs, name).ResourceVersion
			if rv == last {
				return false
			}
			last = rv
			return true
		})
		seen++
	}
}

// testClientGoToDlock: the adversary is a client-go LeaderElector that
// leads a Lease while a dlock Lead campaigns for it. The dlock side must
// not lead while client-go renews (for more than a lease duration), and
// must lead once client-go steps down and releases, woken by the watch.
func testClientGoToDlock(t *testing.T, k *testserver.Kube) {
	cs := clientset(t, k, testserver.KubeUser, "")
	name := "interop-cg-to-dlock"
	var leaders atomic.Int32
	cg := startElector(t, cs, name, "client-go-replica", &leaders)
	<-cg.led
	l := newLocker(t, cs)
	dled := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Lead(ctx, name, func(ctx context.Context) error {
		if n := leaders.Add(1); n != 1 {
			t.Errorf("dlock started leading with %d leaders acting", n)
		}
		once.Do(func() { close(dled) })
		<-ctx.Done()
		leaders.Add(-1)
		return nil
	}, dlock.WithTTL(2*time.Second))
	renewals(t, cs, name, 12) // every 500 ms: 6 s, over the 4 s lease
	select {
	case <-dled:
		t.Fatal("dlock led while client-go renewed the lease")
	default:
	}
	leaders.Add(-1) // client-go acts no more once its context ends
	cg.stop()
	<-cg.stopped
	select {
	case <-dled:
	case <-time.After(30 * time.Second):
		t.Fatal("dlock did not lead within 30 s of client-go's release")
	}
	info, err := l.Inspect(t.Context(), name)
	if err != nil || len(info) != 1 || info[0].Fence == 0 {
		t.Errorf("Inspect(%q) = %+v, %v; want dlock's holder with a fencing token", name, info, err)
	}
	if h := getLease(t, cs, name).Spec.HolderIdentity; h == nil || *h == "" || *h == "client-go-replica" {
		t.Errorf("holderIdentity = %v after the handover, want dlock's owner", h)
	}
}

// testDlockToClientGo: the adversary is a client-go LeaderElector that
// campaigns while a dlock Lead holds the Lease. It must not lead while
// dlock renews, and must lead once dlock's Lead ends and releases.
func testDlockToClientGo(t *testing.T, k *testserver.Kube) {
	cs := clientset(t, k, testserver.KubeUser, "")
	name := "interop-dlock-to-cg"
	var leaders atomic.Int32
	l := newLocker(t, cs)
	dled := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- l.Lead(ctx, name, func(ctx context.Context) error {
			leaders.Add(1)
			once.Do(func() { close(dled) })
			<-ctx.Done()
			leaders.Add(-1)
			return nil
		}, dlock.WithTTL(2*time.Second))
	}()
	<-dled
	cg := startElector(t, cs, name, "client-go-replica", &leaders)
	renewals(t, cs, name, 9) // every 667 ms: 6 s, over the 3 s lease dlock writes
	select {
	case <-cg.led:
		t.Fatal("client-go led while dlock renewed the lease")
	default:
	}
	cancel()
	if err := <-done; err == nil {
		t.Errorf("Lead returned nil after its context ended, want ctx's error")
	}
	select {
	case <-cg.led:
	case <-time.After(30 * time.Second):
		t.Fatal("client-go did not lead within 30 s of dlock's release")
	}
	if !cg.le.IsLeader() {
		t.Errorf("client-go IsLeader = false after the handover")
	}
}

// testPartitionedDlockToClientGo: the adversary is a network partition
// between a dlock holder and the apiserver while a client-go
// LeaderElector campaigns. client-go takes over by its own rule (no
// change of the record, read in whole seconds, for leaseDurationSeconds
// on its clock); by the time it starts leading, the cut-off holder's Done
// must have closed.
func testPartitionedDlockToClientGo(t *testing.T, k *testserver.Kube) {
	proxy := testserver.StartProxy(t, strings.TrimPrefix(k.URL(), "https://"))
	cut := clientset(t, k, testserver.KubeUser, "https://"+proxy.Addr())
	cs := clientset(t, k, testserver.KubeUser, "")
	name := "interop-partitioned-dlock"
	h := testkit.MustAcquire(t, newLocker(t, cut), name, dlock.WithTTL(time.Second))
	var leaders atomic.Int32
	leaders.Add(1) // the dlock holder
	cg := startElector(t, cs, name, "client-go-replica", &leaders, func() bool { return testkit.IsClosed(h.Done()) })
	renewals(t, cs, name, 4) // client-go sees the holder renew first
	proxy.Partition(t)
	select {
	case <-cg.led:
	case <-time.After(60 * time.Second):
		t.Fatal("client-go did not lead within 60 s of the holder's partition")
	}
}
