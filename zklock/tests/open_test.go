package zklock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
)

// Open of a closed port gives up when its context ends, and says it
// cannot connect.
func TestOpenUnreachable(t *testing.T) {
	sessionlocktest.TestOpenUnreachable(t, "zk://127.0.0.1:1")
}

func TestOpenURL(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	for _, u := range []string{
		"zk://" + z.Addr(),
		"zk://" + z.Addr() + "/apps/locks?session_timeout=4s",
		"zk://" + z.Addr() + "," + z.Addr() + "?suspend_timeout=1s",
	} {
		l, err := dlock.Open(t.Context(), u)
		if err != nil {
			t.Fatalf("Open(%q) = %v, want a Locker", u, err)
		}
		k, err := l.TryAcquire(t.Context(), "n")
		if err != nil {
			t.Fatalf("Open(%q): TryAcquire = %v", u, err)
		}
		k.Release(t.Context())
		if err := l.Close(); err != nil {
			t.Errorf("Open(%q): Close = %v", u, err)
		}
	}
	conn := z.Conn(t, 4e9)
	if ok, _, err := conn.Exists("/apps/locks"); !ok || err != nil {
		t.Errorf("zk://.../apps/locks did not use /apps/locks as its root (%v)", err)
	}
}

func TestOpenURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"zk://", "zk:// URL has no host"},
		{"zk://h:0", `bad port "0"`},
		{"zk://h?session_timeout=soon", `"soon" is not a duration`},
		{"zk://h?root=/x", `unknown parameter "root" for zk://`},
		{"zk://h/a//b", `prefix "/a//b" is not a valid znode path`},
		{"zk://alice@h", `user "alice" but no password`},
		{"zk://:pw@h", "a password but no user"},
	} {
		_, err := dlock.Open(t.Context(), tc.url)
		if !errors.Is(err, dlock.ErrBadURL) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrBadURL with %q", tc.url, err, tc.want)
		}
	}
}
