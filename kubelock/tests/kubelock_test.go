package kubelock_test

import (
	"context"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	"github.com/dlock-go/dlock/kubelock"
	"github.com/dlock-go/dlock/kubelock/internal/testhook"
)

// namespace is where the tests keep their Leases: the least-privileged
// user (testserver.KubeUser) may use Leases there and nothing else.
const namespace = "default"

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{"hold": testworker.Hold, "tokenhold": testworker.TokenHold})
	m.Run()
}

// startKube starts an apiserver and lets testserver.KubeUser use Leases
// in namespace.
func startKube(t testing.TB) *testserver.Kube {
	t.Helper()
	k := testserver.StartKube(t)
	k.GrantLeases(t, namespace)
	return k
}

// restConfig returns the client configuration of user from the
// kubeconfig the server writes, reaching the apiserver at server ("" for
// directly), with a store URL's rate limit.
func restConfig(t testing.TB, k *testserver.Kube, user, server string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", k.WriteKubeconfig(t, user, server, namespace))
	if err != nil {
		t.Fatalf("load the kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = kubelock.URLQPS, kubelock.URLBurst
	return cfg
}

// clientset returns a clientset as user, reaching the apiserver at server
// ("" for directly).
func clientset(t testing.TB, k *testserver.Kube, user, server string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(t, k, user, server))
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig = %v", err)
	}
	return cs
}

// storeURL returns the kube:// URL of namespace through a kubeconfig of
// user reaching the apiserver at server ("" for directly).
func storeURL(t testing.TB, k *testserver.Kube, user, server string) string {
	t.Helper()
	return "kube:///" + namespace + "?kubeconfig=" + k.WriteKubeconfig(t, user, server, namespace)
}

// newLocker returns a Locker on cs, closed at the end of the test.
func newLocker(t testing.TB, cs kubernetes.Interface) *dlock.Locker {
	t.Helper()
	l, err := kubelock.New(cs, namespace, nil)
	if err != nil {
		t.Fatalf("kubelock.New = %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// getLease reads the Lease that holds name.
func getLease(t testing.TB, cs kubernetes.Interface, name string) *coordv1.Lease {
	t.Helper()
	lease, err := cs.CoordinationV1().Leases(namespace).Get(t.Context(), testhook.LeaseName(name), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the lease of %q: %v", name, err)
	}
	return lease
}

// harness returns a conformance Harness whose Lockers run as the
// least-privileged user, each through a client of its own, as replicas
// of a service would: those of NewLocker a client-go clientset, those of
// LockerAndDriver kubelock's own client of Leases, as a store URL's
// Locker has. (Lockers sharing one clientset share its rate limit, 50/s:
// MutualExclusion's hot name then took 94 s, its compare-and-set writes
// going out ever staler behind the limiter, 7 conflicts per acquisition;
// 25 s with a clientset each.) Ping reads through cs. Expire deletes the
// Lease as the administrator.
func harness(cfg *rest.Config, cs, admin kubernetes.Interface) dlocktest.Harness {
	return dlocktest.Harness{
		NewLocker: func(t testing.TB) *dlock.Locker {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatalf("kubernetes.NewForConfig = %v", err)
			}
			l, err := kubelock.New(cs, namespace, nil)
			if err != nil {
				t.Fatalf("kubelock.New = %v", err)
			}
			return l
		},
		LockerAndDriver: func(t testing.TB) (*dlock.Locker, driver.Driver) {
			l, d, err := testhook.New(cfg, namespace)
			if err != nil {
				t.Fatalf("testhook.New = %v", err)
			}
			return l, d
		},
		Expire: func(t testing.TB, name string) {
			t.Helper()
			err := admin.CoordinationV1().Leases(namespace).Delete(t.Context(), testhook.LeaseName(name), metav1.DeleteOptions{})
			if err != nil {
				t.Fatalf("delete the lease of %q: %v", name, err)
			}
		},
		Ping: func(ctx context.Context) error {
			_, err := cs.CoordinationV1().Leases(namespace).Get(ctx, "dlock-ping", metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		},
		// A Lease holds one holderIdentity, which client-go's leader
		// election reads: see the package doc's Limits.
		NoModes:     true,
		NoResume:    true,
		NoLockDelay: true,
		TTL:         time.Second,
	}
}

// TestKube runs every test that leaves the apiserver as it found it on
// one apiserver and etcd (a start takes several seconds of a loaded
// machine); TestApiserverFaults has its own, since it pauses and restarts
// them. Each test uses Lease names of its own.
func TestKube(t *testing.T) {
	k := startKube(t)
	for _, c := range []struct {
		name string
		test func(*testing.T, *testserver.Kube)
	}{
		{"Conformance", testConformance},
		{"KillHolder", testKillHolder},
		{"Partition", testPartition},
		{"ClientGoToDlock", testClientGoToDlock},
		{"DlockToClientGo", testDlockToClientGo},
		{"PartitionedDlockToClientGo", testPartitionedDlockToClientGo},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, k) })
	}
}

func testConformance(t *testing.T, k *testserver.Kube) {
	dlocktest.Run(t, harness(restConfig(t, k, testserver.KubeUser, ""), clientset(t, k, testserver.KubeUser, ""), clientset(t, k, testserver.KubeAdmin, "")))
}

func BenchmarkKube(b *testing.B) {
	k := startKube(b)
	dlocktest.RunBenchmarks(b, harness(restConfig(b, k, testserver.KubeUser, ""), clientset(b, k, testserver.KubeUser, ""), clientset(b, k, testserver.KubeAdmin, "")))
}
