package etcdlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/etcdlock/internal/testhook"
	"github.com/dlock-go/dlock/internal/testkit"
	"github.com/dlock-go/dlock/internal/testserver"
)

// refusalLimit bounds how long an Open or Acquire that the server refuses
// may take: the refusal must end it, not this context.
const refusalLimit = time.Minute

// tlsQuery returns the TLS parameters of a URL for the PKI, with the
// client certificate cert and key unless they are empty.
func tlsQuery(p *testserver.PKI, cert, key string) url.Values {
	q := url.Values{"tls_ca": {p.CAFile}}
	if cert != "" {
		q.Set("tls_cert", cert)
		q.Set("tls_key", key)
	}
	return q
}

// storeURL returns the URL of e as user (with password; no user if
// empty) under the prefix locks/, with query q.
func storeURL(e *testserver.Etcd, scheme string, user *url.Userinfo, q url.Values) string {
	u := url.URL{Scheme: scheme, User: user, Host: e.Addr(), Path: "/locks", RawQuery: q.Encode()}
	return u.String()
}

// openRefused opens rawURL, which the server or the client refuses, and
// returns the error; the refusal must end Open, not its context.
func openRefused(t *testing.T, rawURL string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), refusalLimit)
	defer cancel()
	start := time.Now()
	l, err := dlock.Open(ctx, rawURL)
	if err == nil {
		l.Close()
		t.Fatalf("Open(%q) = a Locker, want an error", backend.RedactURL(rawURL))
	}
	t.Logf("Open(%q) failed after %v: %v", backend.RedactURL(rawURL), time.Since(start).Round(time.Millisecond), err)
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("Open(%q) = %v, want the refusal to end it, not a timeout", backend.RedactURL(rawURL), err)
	}
	return err
}

// TLS without client certificates: the server's certificate is verified
// against tls_ca, under the endpoint's host or tls_server_name; without
// tls_ca it fails verification at once, unless verification is turned
// off by name.
func TestOpenTLS(t *testing.T) {
	p := testserver.NewPKI(t)
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{PKI: p})
	root := e.Client(t)
	lock := func(t *testing.T, rawURL string) {
		t.Helper()
		l := testkit.MustOpen(t, rawURL)
		k := testkit.MustTryAcquire(t, l, "n")
		resp, err := root.Get(t.Context(), etcdlock.Key("locks/", "n"), clientv3.WithPrefix())
		if err != nil || resp.Count != 1 {
			t.Errorf("Get(%q) = %v, %v; want the lock's key", etcdlock.Key("locks/", "n"), resp, err)
		}
		testkit.MustRelease(t, k)
	}
	withName := func(name string) url.Values {
		q := tlsQuery(p, "", "")
		q.Set("tls_server_name", name)
		return q
	}

	t.Run("CA", func(t *testing.T) { lock(t, storeURL(e, "etcds", nil, tlsQuery(p, "", ""))) })
	// Any TLS parameter makes etcd:// speak TLS too.
	t.Run("CAOnEtcdScheme", func(t *testing.T) { lock(t, storeURL(e, "etcd", nil, tlsQuery(p, "", ""))) })
	t.Run("ServerName", func(t *testing.T) { lock(t, storeURL(e, "etcds", nil, withName("localhost"))) })
	t.Run("SkipVerify", func(t *testing.T) {
		lock(t, storeURL(e, "etcds", nil, url.Values{"tls_insecure_skip_verify": {"true"}}))
	})

	t.Run("NoCA", func(t *testing.T) {
		err := openRefused(t, storeURL(e, "etcds", nil, nil))
		if !strings.Contains(err.Error(), "certificate signed by unknown authority") || errors.Is(err, dlock.ErrDenied) {
			t.Errorf("Open without tls_ca = %v, want an unknown authority, not ErrDenied", err)
		}
	})
	// tls_server_name is the name checked, not the endpoint's host.
	t.Run("WrongServerName", func(t *testing.T) {
		err := openRefused(t, storeURL(e, "etcds", nil, withName("elsewhere.example")))
		if !strings.Contains(err.Error(), "not elsewhere.example") {
			t.Errorf("Open with tls_server_name=elsewhere.example = %v, want a certificate not valid for it", err)
		}
	})
	// With a user, Open also fails at once, not after the dial timeout of
	// the authentication.
	t.Run("NoCAWithUser", func(t *testing.T) {
		err := openRefused(t, storeURL(e, "etcds", url.UserPassword("u", "p"), nil))
		if !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("Open without tls_ca = %v, want an unknown authority", err)
		}
	})
}

// The roles of secureEtcd: locker may read and write the keys under
// locks/ and nothing else (etcdctl role grant-permission locker
// readwrite --prefix=true locks/); elsewhere may write under other/ only.
const (
	lockerPassword    = "locker-secret"
	neighbourPassword = "neighbour-secret"
	outsiderPassword  = "outsider-secret"
)

// secureEtcd starts etcd over TLS with client certificates and
// authentication, with the users locker and neighbour (role locker),
// dlock (role locker, for the client certificate's common name) and
// outsider (role elsewhere). It returns the server, the PKI and root's
// client.
func secureEtcd(t *testing.T) (*testserver.Etcd, *testserver.PKI, *clientv3.Client) {
	t.Helper()
	p := testserver.NewPKI(t)
	e := testserver.StartEtcdWith(t, testserver.EtcdOptions{PKI: p, ClientCertAuth: true, RootPassword: "root-secret"})
	root := e.Client(t)
	ctx := t.Context()
	must := func(what string, _ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
	}
	r, err := root.RoleAdd(ctx, "locker")
	must("RoleAdd(locker)", r, err)
	g, err := root.RoleGrantPermission(ctx, "locker", "locks/", clientv3.GetPrefixRangeEnd("locks/"), clientv3.PermissionType(clientv3.PermReadWrite))
	must("RoleGrantPermission(locker, readwrite, locks/)", g, err)
	r, err = root.RoleAdd(ctx, "elsewhere")
	must("RoleAdd(elsewhere)", r, err)
	g, err = root.RoleGrantPermission(ctx, "elsewhere", "other/", clientv3.GetPrefixRangeEnd("other/"), clientv3.PermissionType(clientv3.PermReadWrite))
	must("RoleGrantPermission(elsewhere, readwrite, other/)", g, err)
	for _, u := range []struct{ name, password, role string }{
		{"locker", lockerPassword, "locker"},
		{"neighbour", neighbourPassword, "locker"},
		{"dlock", "unused-secret", "locker"},
		{"outsider", outsiderPassword, "elsewhere"},
	} {
		a, err := root.UserAdd(ctx, u.name, u.password)
		must("UserAdd("+u.name+")", a, err)
		gr, err := root.UserGrantRole(ctx, u.name, u.role)
		must("UserGrantRole("+u.name+", "+u.role+")", gr, err)
	}
	return e, p, root
}

// userURL returns the URL of e for user with password, over TLS with the
// PKI's client certificate.
func userURL(e *testserver.Etcd, p *testserver.PKI, user, password string) string {
	return storeURL(e, "etcds", url.UserPassword(user, password), tlsQuery(p, p.ClientCert, p.ClientKey))
}

// TestSecurity runs against etcd with client certificates and users:
// what each is allowed, and that every refusal is prompt and wraps
// dlock.ErrDenied.
func TestSecurity(t *testing.T) {
	e, p, root := secureEtcd(t)

	// The conformance suite, through dlock.Open, as a user granted only
	// readwrite on the prefix.
	t.Run("LeastPrivilege", func(t *testing.T) {
		lockerURL := userURL(e, p, "locker", lockerPassword)
		dlocktest.Run(t, dlocktest.Harness{
			NewLocker: func(t testing.TB) *dlock.Locker {
				t.Helper()
				l, err := dlock.Open(t.Context(), lockerURL)
				if err != nil {
					t.Fatalf("Open(%q) = %v", backend.RedactURL(lockerURL), err)
				}
				return l
			},
			Expire: func(t testing.TB, name string) {
				t.Helper()
				key := etcdlock.Key("locks/", name)
				resp, err := root.Delete(t.Context(), key, clientv3.WithPrefix())
				if err != nil || resp.Deleted == 0 {
					t.Fatalf("Delete(%q, prefix) = %v, %v; want the holder's key deleted", key, resp, err)
				}
			},
			Queued: func(t testing.TB, name string) int {
				return testhook.QueuedUnder(t.Context(), root, "locks/", name)
			},
			TTL: time.Second,
		})
	})

	// The client certificate's common name is the user, without a
	// password.
	t.Run("CommonNameUser", func(t *testing.T) {
		l := testkit.MustOpen(t, storeURL(e, "etcds", nil, tlsQuery(p, p.ClientCert, p.ClientKey)))
		testkit.MustRelease(t, testkit.MustTryAcquire(t, l, "cn"))
	})

	t.Run("NoClientCertificate", func(t *testing.T) {
		err := openRefused(t, storeURL(e, "etcds", url.UserPassword("locker", lockerPassword), tlsQuery(p, "", "")))
		if !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("Open without a client certificate = %v, want ErrDenied", err)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		err := openRefused(t, userURL(e, p, "locker", "not-the-password"))
		if !errors.Is(err, dlock.ErrDenied) || strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("Open with a wrong password = %v, want ErrDenied without the password", err)
		}
	})

	// A user without the grant on the prefix can open (a lease needs no
	// key permission) but every step on a lock is refused at once.
	t.Run("NoPermission", func(t *testing.T) {
		l := testkit.MustOpen(t, userURL(e, p, "outsider", outsiderPassword))
		ctx, cancel := context.WithTimeout(t.Context(), refusalLimit)
		defer cancel()
		_, err := l.TryAcquire(ctx, "n")
		t.Logf("TryAcquire(n) without permission = %v", err)
		if !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("TryAcquire(n) without permission = %v, want ErrDenied", err)
		}
		if _, err := l.Acquire(ctx, "n"); !errors.Is(err, dlock.ErrDenied) || ctx.Err() != nil {
			t.Errorf("Acquire(n) without permission = %v, want ErrDenied at once", err)
		}
		if _, err := l.Inspect(ctx, "n"); !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("Inspect(n) without permission = %v, want ErrDenied", err)
		}
		if _, err := l.ForceRelease(ctx, "n"); !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("ForceRelease(n) without permission = %v, want ErrDenied", err)
		}
		// Revoking a lease checks write permission on its keys: the
		// outsider cannot revoke a holder's session.
		holder := testkit.MustOpen(t, userURL(e, p, "locker", lockerPassword))
		k := testkit.MustTryAcquire(t, holder, "revoke")
		resp, err := root.Get(ctx, etcdlock.Key("locks/", "revoke"), clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("Get(%q) = %v, %v; want the holder's key", etcdlock.Key("locks/", "revoke"), resp, err)
		}
		outsider := e.ClientAs(t, "outsider", outsiderPassword)
		if _, err := outsider.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("outsider's Revoke of the holder's lease = %v, want permission denied", err)
		}
		if err := k.Refresh(ctx); err != nil {
			t.Errorf("holder's Refresh after the outsider's Revoke = %v, want nil", err)
		}
		// The same user where its role allows it.
		other := testkit.MustOpen(t, strings.Replace(userURL(e, p, "outsider", outsiderPassword), "/locks?", "/other?", 1))
		testkit.MustRelease(t, testkit.MustTryAcquire(t, other, "n"))
	})

	// A certificate whose common name is no user is refused at the first
	// step on a lock.
	t.Run("UnknownCommonName", func(t *testing.T) {
		cert, key := p.Issue(t, "stranger", "stranger")
		l := testkit.MustOpen(t, storeURL(e, "etcds", nil, tlsQuery(p, cert, key)))
		if _, err := l.TryAcquire(t.Context(), "n"); !errors.Is(err, dlock.ErrDenied) {
			t.Errorf("TryAcquire(n) as an unknown common name = %v, want ErrDenied", err)
		}
	})

	t.Run("Neighbour", func(t *testing.T) { testNeighbour(t, e, p, root) })
}

// testNeighbour: a second user with the same role (write access to the
// same keys) but not the holder's owner string cannot release or refresh
// the holder's lock through dlock; deleting the key directly does free
// it, and the holder learns at its next renewal.
func testNeighbour(t *testing.T, e *testserver.Etcd, p *testserver.PKI, root *clientv3.Client) {
	const name = "neighbour"
	holder := testkit.MustOpen(t, userURL(e, p, "locker", lockerPassword))
	neighbour := testkit.MustOpen(t, userURL(e, p, "neighbour", neighbourPassword))
	neighbourCli := e.ClientAs(t, "neighbour", neighbourPassword)

	// The neighbour's own handle, gone stale: it held the name, its
	// lease ended, and the holder took the name.
	stale := testkit.MustTryAcquire(t, neighbour, name, dlock.WithTTL(time.Second), dlock.WithoutRenewal())
	k, err := holder.Acquire(t.Context(), name, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatalf("Acquire(%q) after the neighbour's lease = %v", name, err)
	}
	if err := stale.Refresh(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("neighbour's stale Refresh = %v, want ErrNotHeld", err)
	}
	if err := stale.Release(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("neighbour's stale Release = %v, want ErrNotHeld", err)
	}
	if _, err := neighbour.TryAcquire(t.Context(), name); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("neighbour's TryAcquire(%q) = %v, want ErrNotAcquired", name, err)
	}
	// A handle made up with another owner string, through the driver.
	if err := testhook.ForgedRelease(t.Context(), neighbourCli, "locks/", name, "forged-owner"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("forged Release = %v, want ErrNotHeld", err)
	}
	if err := testhook.ForgedRefresh(t.Context(), neighbourCli, "locks/", name, "forged-owner"); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("forged Refresh = %v, want ErrNotHeld", err)
	}
	// The holder keeps the lock, with the token it got, above the stale one.
	if err := k.Refresh(t.Context()); err != nil {
		t.Errorf("holder's Refresh after the neighbour's attempts = %v, want nil", err)
	}
	info, err := neighbour.Inspect(t.Context(), name)
	if err != nil || len(info) != 1 || info[0].Owner != k.Owner() || info[0].Fence != k.Fence() {
		t.Errorf("Inspect(%q) = %+v, %v; want the holder %s with fence %d", name, info, err, k.Owner(), k.Fence())
	}
	if !(stale.Fence() < k.Fence()) {
		t.Errorf("holder's fence %d, neighbour's stale fence %d; want the holder's above", k.Fence(), stale.Fence())
	}
	select {
	case <-k.Done():
		t.Fatalf("holder's Done closed after the neighbour's attempts: %v", context.Cause(k.Context()))
	default:
	}

	// What the store allows: the neighbour's write access lets it delete
	// the holder's key. The holder's next renewal finds it gone and its
	// Done closes with ErrLost; the neighbour then gets a higher token,
	// so writes fenced with the holder's token are refused.
	resp, err := neighbourCli.Delete(t.Context(), etcdlock.Key("locks/", name), clientv3.WithPrefix())
	if err != nil || resp.Deleted != 1 {
		t.Fatalf("neighbour's Delete(%q, prefix) = %v, %v; want the holder's key deleted", etcdlock.Key("locks/", name), resp, err)
	}
	start := time.Now()
	waitDone(t, k, 30*time.Second, "holder after the neighbour deleted its key")
	t.Logf("holder's Done closed %v after the neighbour deleted its key (TTL 3s, renewal every 1s)", time.Since(start).Round(time.Millisecond))
	taken := testkit.MustTryAcquire(t, neighbour, name)
	if !(taken.Fence() > k.Fence()) {
		t.Errorf("neighbour's fence %d after the delete, holder's %d; want the neighbour's above", taken.Fence(), k.Fence())
	}
	testkit.MustRelease(t, taken)

	// And the owner string is no secret: anyone who can read the prefix
	// sees it in the key's name (and in Inspect), and the driver releases
	// a key of that owner that it does not hold (an acquisition whose
	// reply was lost).
	k = testkit.MustTryAcquire(t, holder, name, dlock.WithTTL(3*time.Second))
	if err := testhook.ForgedRelease(t.Context(), neighbourCli, "locks/", name, k.Owner()); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("Release with the holder's owner string by another driver = %v, want ErrNotHeld (after deleting the key)", err)
	}
	waitDone(t, k, 30*time.Second, "holder after a release with its owner string")
}
