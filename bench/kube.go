package main

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/kubelock"
)

// The Kubernetes section (issue 30): dlock's kubelock beside client-go's
// leader election (k8s.io/client-go/tools/leaderelection over a
// resourcelock.LeaseLock), on one kube-apiserver that dlock's test
// harness starts (internal/testserver.StartKube).

// kubeNamespace is where the section's Leases live.
const kubeNamespace = "default"

// kubeLib is one side of the Kubernetes section: dlock with a TTL, or
// client-go's LeaderElector with its three durations.
type kubeLib struct {
	key, label string
	ttl        time.Duration // dlock: the lock's TTL; 0 for client-go
	// client-go's LeaderElectionConfig durations.
	lease, renew, retry time.Duration
}

// kubeLibs run in this order within each round. client-go's defaults are
// those its LeaderElectionConfig documents as core clients' (15 s, 10 s,
// 2 s); the 4 s lease keeps their ratios (RenewDeadline 2/3 and
// RetryPeriod 2/15 of LeaseDuration).
var kubeLibs = []kubeLib{
	{key: "dlock-kube", label: "dlock kubelock, TTL 4 s", ttl: 4 * time.Second},
	{key: "client-go", label: "client-go leaderelection, defaults (15 s / 10 s / 2 s)",
		lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second},
	{key: "client-go-4s", label: "client-go leaderelection, 4 s lease (4 s / 2.67 s / 0.53 s)",
		lease: 4 * time.Second, renew: 4 * time.Second * 2 / 3, retry: 4 * time.Second * 2 / 15},
}

// settle is how long a waiter runs before the holder goes: long enough to
// have read the Lease and, for client-go, to poll it again.
func (k kubeLib) settle() time.Duration {
	return max(time.Second, 2*k.retry)
}

// patience bounds any one wait of the section for k.
func (k kubeLib) patience() time.Duration {
	return 3*max(k.ttl, k.lease) + 30*time.Second
}

// counter is an http.RoundTripper that counts the requests sent to the
// apiserver (a watch is one request, however long it runs).
type counter struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// kubeClient is a clientset from a kubeconfig whose requests n counts,
// with a store URL's rate limit (kubelock.URLQPS, URLBurst) for both
// libraries.
func kubeClient(kubeconfig string, n *atomic.Int64) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = kubelock.URLQPS, kubelock.URLBurst
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counter{next: rt, n: n} }
	return kubernetes.NewForConfig(cfg)
}

// contender is one process's claim on a Lease: a dlock Acquire or a
// client-go LeaderElector, running until stop.
type contender struct {
	requests atomic.Int64 // sent by its clientset
	led      chan struct{}
	ledAt    time.Time // when it started leading; read once led is closed
	atLed    int64     // requests it had sent by then
	stop     func()    // gives the Lease up (release) and waits until it has
}

// contend starts k's claim on the Lease name through a clientset of its
// own.
func (k kubeLib) contend(kubeconfig, name, identity string) (*contender, error) {
	c := &contender{led: make(chan struct{})}
	cs, err := kubeClient(kubeconfig, &c.requests)
	if err != nil {
		return nil, err
	}
	onLead := func() {
		c.ledAt, c.atLed = time.Now(), c.requests.Load()
		close(c.led)
	}
	if k.ttl > 0 {
		return c, k.contendDlock(c, cs, name, onLead)
	}
	return c, k.contendClientGo(c, cs, name, identity, onLead)
}

func (k kubeLib) contendDlock(c *contender, cs *kubernetes.Clientset, name string, onLead func()) error {
	l, err := kubelock.New(cs, kubeNamespace, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var lock *dlock.Lock
	done := make(chan struct{})
	go func() { // exits when Acquire returns
		defer close(done)
		lk, err := l.Acquire(ctx, name, dlock.WithTTL(k.ttl))
		if err == nil {
			lock = lk
			onLead()
		}
	}()
	c.stop = func() {
		select {
		case <-c.led:
			lock.Release(context.Background())
		default:
		}
		cancel()
		<-done
		l.Close()
	}
	return nil
}

func (k kubeLib) contendClientGo(c *contender, cs *kubernetes.Clientset, name, identity string, onLead func()) error {
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: kubeNamespace},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		LeaseDuration:   k.lease,
		RenewDeadline:   k.renew,
		RetryPeriod:     k.retry,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { onLead() },
			OnStoppedLeading: func() {},
		},
		Name: name,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // exits when ctx ends (after the release)
		defer close(done)
		le.Run(ctx)
	}()
	c.stop = func() { cancel(); <-done }
	return nil
}

// waitLed waits until c leads, or for d.
func (c *contender) waitLed(d time.Duration) error {
	select {
	case <-c.led:
		return nil
	case <-time.After(d):
		return fmt.Errorf("not leading after %v", d)
	}
}

// quietKlog silences client-go's logging (leader election logs each
// acquisition): the section's output is its table.
func quietKlog() { klog.SetLogger(logr.Discard()) }
