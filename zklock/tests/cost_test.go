package zklock_test

import (
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/sessionlock/sessionlocktest"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// countingConn counts the requests a zk client writes, by opcode: each
// request is one write of its frame (length, xid, opcode, ...). Pings,
// the connect request and the client's own requests (xid <= 0) are not
// counted.
type countingConn struct {
	net.Conn
	c *sessionlocktest.RequestCounter
}

func (w *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 {
		w.c.Add("op" + strconv.Itoa(int(int32(binary.BigEndian.Uint32(b[8:12])))))
	}
	return w.Conn.Write(b)
}

// An uncontended TryAcquire+Release costs two requests in two round
// trips: the create of the child with the write of its parent's data, in
// one transaction (a multi, op 14), whose reply shows the child alone and
// its czxid; then the delete (op 2). In every mode.
func TestRequestsPerAcquire(t *testing.T) {
	conn, counter := countingConnection(t)
	// The name's parent is made a plain znode, which the server never
	// removes, rather than a container it may remove while the test
	// counts (then the next create would cost more).
	persist := func(t *testing.T, name string) {
		path := zklock.Key("", name)
		if err := conn.Delete(path, -1); err != nil {
			t.Fatalf("Delete(%s) = %v", path, err)
		}
		if _, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("Create(%s) = %v", path, err)
		}
	}
	sessionlocktest.TestRequestsPerAcquire(t, newLocker(t, conn), counter, 2, persist)
}

// When the child is not alone under its parent, the create's reply does
// not say whether it holds: a read of the queue and of the child's stat,
// pipelined, follow it, so the cycle costs four requests in three round
// trips.
func TestRequestsPerAcquireNotAlone(t *testing.T) {
	conn, counter := countingConnection(t)
	// A znode that is not a queue entry keeps the server from removing
	// the empty parent while the test counts.
	keep := func(t *testing.T, name string) {
		path := zklock.Key("", name) + "/keep"
		if _, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("Create(%s) = %v", path, err)
		}
		t.Cleanup(func() { conn.Delete(path, -1) })
	}
	sessionlocktest.TestRequestsPerAcquire(t, newLocker(t, conn), counter, 4, keep)
}

// countingConnection starts a server and returns a connection to it whose
// requests counter counts.
func countingConnection(t *testing.T) (*zk.Conn, *sessionlocktest.RequestCounter) {
	t.Helper()
	_, conn, counter := countingServer(t)
	return conn, counter
}

// countingServer starts a server and returns it and a connection to it
// whose requests counter counts.
func countingServer(t *testing.T) (*testserver.ZooKeeper, *zk.Conn, *sessionlocktest.RequestCounter) {
	t.Helper()
	z := testserver.StartZooKeeper(t)
	counter := &sessionlocktest.RequestCounter{}
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		conn, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, c: counter}, nil
	}
	conn, events, err := zk.Connect([]string{z.Addr()}, sessionTimeout, zk.WithDialer(dial), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect = %v", err)
	}
	t.Cleanup(conn.Close)
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	return z, conn, counter
}
