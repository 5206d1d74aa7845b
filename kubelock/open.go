package kubelock

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/connrotation"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
)

func init() {
	backend.Register("kube", open)
}

// URLQPS and URLBurst are the client-side rate limit of the clientset a
// store URL makes, unless its kubeconfig sets one: client-go's default
// (5 requests a second, bursts of 10) is shared by every lock of the
// Locker, and one held lock renews 3/TTL times a second, so a few locks
// with short TTLs would be throttled past their loss deadline. The
// apiserver's own priority and fairness still applies.
const (
	URLQPS   = 50
	URLBurst = 100
)

// dialTimeout bounds a connection attempt to the apiserver, as
// client-go's default dialer does.
const dialTimeout = 30 * time.Second

// inCluster is the host of a store URL that means the pod's own service
// account (rest.InClusterConfig).
const inCluster = "in-cluster"

// open serves store URLs kube:///namespace[?kubeconfig=path&context=name]
// and kube://in-cluster/namespace (see the package doc). It reads the
// namespace's Leases once, so that an unreachable apiserver or missing
// rights fail here, within ctx, rather than at the first acquisition.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "kubeconfig", "context")
	if err != nil {
		return nil, err
	}
	cfg, namespace, err := restConfig(u, q)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = URLQPS, URLBurst
	}
	if ns := strings.Trim(u.Path, "/"); ns != "" {
		namespace = ns
	}
	// The Locker owns this client: its connections are its own (not
	// shared through client-go's transport cache), and Close closes them
	// all, idle or not, once the watches have stopped.
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: dialTimeout, KeepAlive: dialTimeout}).DialContext)
	var closed atomic.Bool
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A dial that Close overtook (a watch or step reconnecting as the
		// Locker closed) would leave a connection CloseAll missed: the
		// fault suite's kube worker found an http2 read loop after Close.
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil && closed.Load() {
			c.Close()
			return nil, errClosed
		}
		return c, err
	}
	leases, err := newRESTLeases(cfg, namespace)
	if err != nil {
		return nil, err
	}
	d, lcfg, err := newDriver(leases, nil)
	if err != nil {
		return nil, err
	}
	d.closeConns = func() {
		closed.Store(true) // before CloseAll: a dial that ends after it sees it
		dialer.CloseAll()
	}
	if _, err := d.leases.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, driver.StoreError(d, fmt.Errorf("kubelock: list leases in namespace %q at %s: %w", namespace, cfg.Host, err))
	}
	return dlock.NewLocker(d, lcfg), nil
}

// restConfig returns the client configuration a store URL names, and the
// namespace its kubeconfig context (or the pod) names, "default" if none.
func restConfig(u *url.URL, q url.Values) (*rest.Config, string, error) {
	switch u.Host {
	case inCluster:
		if q.Get("kubeconfig") != "" || q.Get("context") != "" {
			return nil, "", fmt.Errorf("%w: kube://in-cluster takes no kubeconfig or context", dlock.ErrBadURL)
		}
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubelock: in-cluster configuration: %w", err)
		}
		// The pod's namespace, from its service account's files.
		ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).Namespace()
		if err != nil || ns == "" {
			ns = "default"
		}
		return cfg, ns, nil
	case "":
	default:
		return nil, "", fmt.Errorf("%w: kube:// URLs name no host but %q (kube:///namespace or kube://in-cluster/namespace)", dlock.ErrBadURL, inCluster)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path := q.Get("kubeconfig"); path != "" {
		rules.ExplicitPath = path
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: q.Get("context")})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubelock: kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}
