package zklock

import (
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// minHandshake is the least time BoundedDialer gives a server to answer a
// connect request.
const minHandshake = time.Second

// BoundedDialer returns a zk.Dialer that dials with dial (net.DialTimeout
// if nil) and bounds the handshake of each connection it makes to two
// thirds of sessionTimeout (at least 1 s), the bound go-zookeeper puts on
// every later read. Use it in zk.WithDialer for a *zk.Conn you pass to
// New; Open's connections use it already.
//
// go-zookeeper (v1.0.4) waits up to ten times that, 6.7 session timeouts,
// for the server's answer to its connect request. A ZooKeeper server that
// restarts accepts connections before it serves them, and one that then
// never answered a reconnecting client held it for 53 s with an 8 s
// session: no lock could be taken or released through that connection,
// and its session expired meanwhile. Bounded, the client gives up on that
// connection and dials again within the session, as ZooKeeper's Java
// client does with its connect timeout.
//
// Only the handshake is bounded: go-zookeeper sets later deadlines from
// the session timeout the server agreed, which may be longer than the one
// asked for.
func BoundedDialer(sessionTimeout time.Duration, dial zk.Dialer) zk.Dialer {
	if dial == nil {
		dial = net.DialTimeout
	}
	bound := max(sessionTimeout*2/3, minHandshake)
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: c, bound: bound}, nil
	}
}

// handshakeConn clamps the first read and write deadlines set on it, the
// handshake's, to bound from now.
type handshakeConn struct {
	net.Conn
	bound time.Duration

	mu          sync.Mutex
	read, write bool // the first deadline of each kind was set
}

func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(&c.read, t))
}

func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(&c.write, t))
}

// clamp returns t, or now+bound if this is the first non-zero deadline
// of its kind and t is later.
func (c *handshakeConn) clamp(done *bool, t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	c.mu.Lock()
	first := !*done
	*done = true
	c.mu.Unlock()
	if limit := time.Now().Add(c.bound); first && t.After(limit) {
		return limit
	}
	return t
}
