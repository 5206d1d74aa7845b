package zklock_test

import (
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/zklock"
)

// The adversary is a server that accepts a connection and never answers
// the client's connect request, as a ZooKeeper restarting under load did
// (CI on 88ef62b: TestFaults/ServerRestart's clients reconnected the
// moment the port opened and sat 53 s without a session, go-zookeeper's
// handshake wait of ten receive timeouts for an 8 s session). Through
// BoundedDialer the client gives that connection up after two thirds of
// the session timeout and dials again: here 2 s for a 3 s session, against
// 20 s unbounded. The 12 s limit leaves six times the bound for a slow
// machine and is still well under the unbounded wait.
func TestHandshakeBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() { // exits when ln is closed
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // read nothing, answer nothing
		}
	}()
	const session = 3 * time.Second
	conn, _, err := zk.Connect([]string{ln.Addr().String()}, session,
		zk.WithDialer(zklock.BoundedDialer(session, nil)),
		zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var first net.Conn
	select {
	case first = <-accepted:
		defer first.Close()
	case <-time.After(12 * time.Second):
		t.Fatal("the client never dialled the silent server")
	}
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(12 * time.Second):
		t.Fatalf("the client still waits on its first connection's handshake after 12s (session %v)", session)
	}
	if s := conn.State(); s == zk.StateHasSession {
		t.Errorf("State = %v against a server that never answered", s)
	}
}
