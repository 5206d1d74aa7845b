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

// An uncontended TryAcquire+Release costs four requests in three round
// trips: the create of the child (op 1), the read of the queue (op 12)
// and of the child's stat (op 3), pipelined, the delete (op 2); in every
// mode.
func TestRequestsPerAcquire(t *testing.T) {
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
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
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
