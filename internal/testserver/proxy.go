package testserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy between the clients of a test and one server, which
// the test uses to inject network faults: a partition, lost replies, added
// latency, reset connections. It runs in the test process.
//
// Clients connect to Addr. Behind it, Toxiproxy's Go package (run
// in-process, without toxiproxy-server) relays each connection to the
// upstream and applies the faults, except ResetConnections: Toxiproxy can
// reset a connection only when data next flows through it, and only if the
// reset was configured before the connection opened, so the front that
// accepts clients is a small relay of its own that keeps every client
// connection and can reset it at once.
//
// Its methods are safe for concurrent use.
type Proxy struct {
	upstream string
	ln       net.Listener     // the front: what clients dial
	tp       *toxiproxy.Proxy // between the front and the upstream
	loops    sync.WaitGroup   // the accept loop and every relay goroutine

	mu      sync.Mutex
	conns   map[*pipe]struct{} // open client connections
	stopped bool
}

// pipe is one client connection and the proxy's connection onward.
type pipe struct{ client, next *net.TCPConn }

// StartProxy starts a Proxy to upstream ("host:port") on a free loopback
// port. It is stopped, and every connection through it closed, when the
// test ends.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	tp := toxiproxy.NewProxy(api, "proxy", "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		t.Fatalf("start proxy to %s: %v", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tp.Stop()
		t.Fatalf("start proxy to %s: %v", upstream, err)
	}
	p := &Proxy{upstream: upstream, ln: ln, tp: tp, conns: make(map[*pipe]struct{})}
	p.loops.Add(1)
	go p.accept() // exits when stop closes ln
	t.Cleanup(p.stop)
	return p
}

// Addr returns the address clients dial, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// accept relays every client connection to Toxiproxy until the listener
// is closed.
func (p *Proxy) accept() {
	defer p.loops.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		n, err := net.Dial("tcp", p.tp.Listen)
		if err != nil {
			c.Close()
			continue
		}
		pp := &pipe{client: c.(*net.TCPConn), next: n.(*net.TCPConn)}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			pp.close()
			return
		}
		p.conns[pp] = struct{}{}
		p.loops.Add(2)
		p.mu.Unlock()
		// Each copy ends when either side closes; both then close the pipe.
		go p.relay(pp, pp.next, pp.client)
		go p.relay(pp, pp.client, pp.next)
	}
}

func (p *Proxy) relay(pp *pipe, dst, src *net.TCPConn) {
	defer p.loops.Done()
	_, _ = io.Copy(dst, src)
	pp.close()
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
}

func (pp *pipe) close() {
	pp.client.Close()
	pp.next.Close()
}

// Partition blackholes both directions: whatever either side sends is held
// by the proxy, not delivered, and the connections stay open, as when a
// network path drops every packet and TCP keeps retransmitting. New
// connections are accepted (as if the handshake got through) but carry
// nothing either. Heal delivers what was held, in order.
func (p *Proxy) Partition(t testing.TB) {
	t.Helper()
	// A latency toxic holds each chunk until its delay passes, and on
	// removal delivers what it holds; a day is longer than any test.
	p.addBothWays(t, "partition", "latency", map[string]int64{"latency": (24 * time.Hour).Milliseconds()})
}

// DropReplies swallows what the server sends while requests still reach
// it: the server acts, the client never hears. A byte stream with a gap in
// it cannot be used again, so Heal closes every connection that carried
// replies meanwhile (the client sees the connection end, as after a
// timeout).
func (p *Proxy) DropReplies(t testing.TB) {
	t.Helper()
	p.add(t, "drop_replies", "timeout", "downstream", map[string]int64{"timeout": 0})
}

// Latency delays data in each direction by d, so a request and its reply
// take 2d longer. Calling it again replaces the delay.
func (p *Proxy) Latency(t testing.TB, d time.Duration) {
	t.Helper()
	for _, name := range []string{"latency_upstream", "latency_downstream"} {
		if err := p.tp.Toxics.RemoveToxic(context.Background(), name); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
			t.Fatalf("proxy to %s: remove latency: %v", p.upstream, err)
		}
	}
	p.addBothWays(t, "latency", "latency", map[string]int64{"latency": d.Milliseconds()})
}

// ResetConnections resets every open connection through the proxy: the
// client gets a TCP RST (ECONNRESET), and the server sees its connection
// close. New connections work as before.
func (p *Proxy) ResetConnections(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for pp := range p.conns {
		// Linger 0 makes Close send RST instead of FIN.
		for _, c := range []*net.TCPConn{pp.client, pp.next} {
			if err := c.SetLinger(0); err != nil && !errors.Is(err, net.ErrClosed) {
				t.Fatalf("proxy to %s: reset connection: %v", p.upstream, err)
			}
			c.Close()
		}
		delete(p.conns, pp)
	}
}

// Heal removes every fault: held data is delivered, in order, and new
// data flows again.
func (p *Proxy) Heal(t testing.TB) {
	t.Helper()
	p.tp.Toxics.ResetToxics(context.Background())
}

func (p *Proxy) addBothWays(t testing.TB, name, typ string, attrs map[string]int64) {
	t.Helper()
	p.add(t, name+"_upstream", typ, "upstream", attrs)
	p.add(t, name+"_downstream", typ, "downstream", attrs)
}

// add adds a toxic to every connection, present and future, and returns
// once every present connection has it.
func (p *Proxy) add(t testing.TB, name, typ, stream string, attrs map[string]int64) {
	t.Helper()
	spec, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1, "attributes": attrs})
	if err != nil {
		t.Fatalf("proxy to %s: %v", p.upstream, err)
	}
	if _, err := p.tp.Toxics.AddToxicJson(bytes.NewReader(spec)); err != nil {
		t.Fatalf("proxy to %s: add %s: %v", p.upstream, name, err)
	}
}

// stop removes the faults (so that nothing stays held in the proxy), stops
// accepting, closes every connection and waits for the relays to end.
func (p *Proxy) stop() {
	p.tp.Toxics.ResetToxics(context.Background())
	p.mu.Lock()
	p.stopped = true
	for pp := range p.conns {
		pp.close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.tp.Stop()
	p.loops.Wait()
}
