package zklock_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/zklock"
)

// requestCounter counts the requests a zk client writes, by opcode: each
// request is one write of its frame (length, xid, opcode, ...). Pings,
// the connect request and the client's own requests (xid <= 0) are not
// counted.
type requestCounter struct {
	mu sync.Mutex
	by map[int32]int
}

func (c *requestCounter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

type countingConn struct {
	net.Conn
	c *requestCounter
}

func (w *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 {
		w.c.mu.Lock()
		w.c.by[int32(binary.BigEndian.Uint32(b[8:12]))]++
		w.c.mu.Unlock()
	}
	return w.Conn.Write(b)
}

func (c *requestCounter) take() (int, map[int32]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.by {
		n += v
	}
	by := c.by
	c.by = make(map[int32]int)
	return n, by
}

// An uncontended exclusive TryAcquire+Release costs four requests in
// three round trips: the create of the child, the read of the queue and
// of the child's stat (pipelined), the delete. Shared holds and permits
// cost the same.
func TestRequestsPerAcquire(t *testing.T) {
	z := testserver.StartZooKeeper(t)
	counter := &requestCounter{by: make(map[int32]int)}
	conn, events, err := zk.Connect([]string{z.Addr()}, sessionTimeout, zk.WithDialer(counter.dial), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect = %v", err)
	}
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	l := newLocker(t, conn)
	for _, c := range []struct {
		what string
		opts []dlock.Option
	}{
		{"exclusive", nil},
		{"shared", []dlock.Option{dlock.Shared()}},
		{"permit", []dlock.Option{dlock.WithLimit(4)}},
	} {
		name := "cost/" + c.what
		once := func() {
			k, err := l.TryAcquire(t.Context(), name, c.opts...)
			if err != nil {
				t.Fatalf("TryAcquire(%q) %s = %v", name, c.what, err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatalf("Release = %v", err)
			}
		}
		once() // creates the parent znode
		// A znode that is not a queue entry keeps the server from
		// removing the empty parent meanwhile.
		keep := zklock.Key("", name) + "/keep"
		if _, err := conn.Create(keep, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("Create(%s) = %v", keep, err)
		}
		counter.take()
		const rounds = 20
		for range rounds {
			once()
		}
		n, by := counter.take()
		t.Logf("%s TryAcquire+Release: %.2f requests (by opcode: %s)", c.what, float64(n)/rounds, fmt.Sprint(by))
		if n != 4*rounds {
			t.Errorf("%s TryAcquire+Release costs %.2f requests, want 4", c.what, float64(n)/rounds)
		}
		if err := conn.Delete(keep, -1); err != nil {
			t.Errorf("Delete(%s) = %v", keep, err)
		}
	}
}
