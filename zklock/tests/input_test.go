package zklock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
)

// A nil connection and bad options give errors wrapping ErrInvalid, not
// a panic or a Locker that fails every call.
func TestNewInvalid(t *testing.T) {
	if l, err := zklock.New(nil, nil); !errors.Is(err, dlock.ErrInvalid) || l != nil {
		t.Errorf("New(nil, nil) = %v, %v; want nil, ErrInvalid", l, err)
	}
	// The options are checked before the connection is used, so a
	// connection that was never dialled will do.
	conn := unconnected(t)
	for _, o := range []zklock.Options{
		{Prefix: "/a//b"},
		{Prefix: "/a/./b"},
		{Prefix: "/a/../b"},
		{Prefix: "a\x00b"},
		{SuspendTimeout: -1},
	} {
		if l, err := zklock.New(conn, &o); !errors.Is(err, dlock.ErrInvalid) || l != nil {
			t.Errorf("New(conn, %+v) = %v, %v; want nil, ErrInvalid", o, l, err)
		}
	}
}

// unconnected returns a connection to a closed port: it never gets a
// session.
func unconnected(t *testing.T) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{"127.0.0.1:1"}, 4*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect = %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
