package etcdlock_test

import (
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Open of a closed port gives up when its context ends (not after a
// fixed 10 s), and says it cannot connect.
func TestOpenUnreachable(t *testing.T) {
	sessionlocktest.TestOpenUnreachable(t, "etcd://127.0.0.1:1")
}

func TestOpenURL(t *testing.T) {
	e := testserver.StartEtcd(t)
	cli := e.Client(t)
	for _, tc := range []struct{ url, prefix string }{
		{"etcd://" + e.Addr(), etcdlock.DefaultPrefix},
		{"etcd://" + e.Addr() + "/apps/locks?session_ttl=3s", "apps/locks/"},
		{"etcd://" + e.Addr() + "," + e.Addr(), etcdlock.DefaultPrefix},
	} {
		l, err := dlock.Open(t.Context(), tc.url)
		if err != nil {
			t.Fatalf("Open(%q) = %v, want a Locker", tc.url, err)
		}
		k, err := l.TryAcquire(t.Context(), "n")
		if err != nil {
			t.Fatalf("Open(%q): TryAcquire = %v", tc.url, err)
		}
		resp, err := cli.Get(t.Context(), etcdlock.Key(tc.prefix, "n"), clientv3.WithPrefix())
		if err != nil || resp.Count != 1 {
			t.Errorf("Open(%q): lock not under prefix %q (%v)", tc.url, tc.prefix, err)
		}
		k.Release(t.Context())
		if err := l.Close(); err != nil {
			t.Errorf("Open(%q): Close = %v", tc.url, err)
		}
	}
}

func TestOpenURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"etcd://", "etcd:// URL has no host"},
		{"etcd://h:x,h:1", `bad port "x"`},
		{"etcd://h?session_ttl=-1s", `session_ttl "-1s" is not a positive duration`},
		{"etcd://h?prefix=x", `unknown parameter "prefix" for etcd://`},
		{"etcd://h?compact_every=-1s", `compact_every "-1s" is not a duration of 0 or more`},
		{"etcd://h?compact_every=often", `compact_every "often" is not a duration of 0 or more`},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q", tc.url, err, tc.want)
		}
	}
}
