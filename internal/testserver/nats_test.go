package testserver_test

import (
	"net"
	"testing"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestStartNATS starts a nats-server with JetStream and restarts it on the
// same address; the adversary is a port or store that does not survive
// the restart.
func TestStartNATS(t *testing.T) {
	n := testserver.StartNATS(t)
	dial := func() {
		t.Helper()
		c, err := net.Dial("tcp", n.Addr())
		if err != nil {
			t.Fatalf("dial nats-server at %s: %v", n.Addr(), err)
		}
		c.Close()
	}
	dial()
	addr := n.Addr()
	n.Restart(t)
	if n.Addr() != addr {
		t.Errorf("Addr() after Restart = %s, want %s", n.Addr(), addr)
	}
	dial()
}
