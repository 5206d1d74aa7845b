package etcdlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc/credentials"

	"github.com/dlock-go/dlock/backend"
)

// tlsCreds are the gRPC transport credentials of a client Open makes for
// etcds://: gRPC's own TLS credentials, with two changes.
//
// The certificate must carry serverName, when the URL gives one
// (tls_server_name), rather than each endpoint's host, which gRPC would
// otherwise put in the TLS configuration whatever it says.
//
// And while Open runs, a refusal that no retry can cure ends it at once:
// gRPC takes every failed handshake for a passing fault and dials again
// until the caller's context ends (forever, for a context without a
// deadline). A refusal is a server certificate that does not verify, or
// a TLS alert from the server, such as the one refusing the client's
// certificate (which TLS 1.3 sends after the client's handshake is over,
// so the connection's reads are watched too). A server that does not
// speak TLS (etcd without --cert-file) resets the connection, which
// passing faults do too: that is left to gRPC's retries.
type tlsCreds struct {
	credentials.TransportCredentials
	serverName string
	w          *tlsWatch
}

// tlsWatch passes the first refusal to fail, until disarm.
type tlsWatch struct {
	mu   sync.Mutex
	fail func(error) // nil once disarmed or fired

	// asked is set when a server asked for a client certificate that the
	// client does not have. TLS 1.3 then completes the client's handshake
	// and the server sends its refusal as an alert and closes; on a
	// loaded machine the close's reset can arrive before the client reads
	// the alert, and the kernel drops the unread alert: the read sees only
	// a reset. After such a request, a reset or EOF at a read is that
	// refusal, not a passing fault.
	asked atomic.Bool
}

// errNoClientCert is the refusal of a server that asked for a client
// certificate the client did not have, seen as a reset (see tlsWatch).
var errNoClientCert = errors.New("the server asked for a client certificate, and the URL gives none")

// newTLSCreds returns the credentials for cfg, whose refusals go to fail
// until the returned watch is disarmed.
func newTLSCreds(cfg *tls.Config, fail func(error)) (*tlsCreds, *tlsWatch) {
	w := &tlsWatch{fail: fail}
	if cfg.GetClientCertificate == nil && len(cfg.Certificates) == 0 {
		cfg = cfg.Clone()
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			w.asked.Store(true)
			return &tls.Certificate{}, nil // sends none, as without the callback
		}
	}
	return &tlsCreds{credentials.NewTLS(cfg), cfg.ServerName, w}, w
}

// disarm stops the watch: refusals after it are left to gRPC's retries.
func (w *tlsWatch) disarm() {
	w.mu.Lock()
	w.fail = nil
	w.mu.Unlock()
}

func (w *tlsWatch) armed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fail != nil
}

// check passes err to fail if it is a refusal (or a reset after the
// server asked for a client certificate the client lacks, see tlsWatch)
// and the watch is armed.
func (w *tlsWatch) check(err error) {
	if r := refusal(err); r != nil {
		err = r
	} else if w.asked.Load() && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)) {
		err = fmt.Errorf("%w: %w", errNoClientCert, err)
	} else {
		return
	}
	w.mu.Lock()
	fail := w.fail
	w.fail = nil
	w.mu.Unlock()
	if fail != nil {
		fail(err)
	}
}

// refusal returns the error to report for a TLS error that a new
// connection would meet again, or nil for any other error: an alert from
// the server refusing the client's certificate, which Open's
// driver.StoreError wraps with dlock.ErrDenied (see errorKinds); another alert (a protocol version the
// server does not speak) and a server certificate that does not verify
// are refusals too, without it.
func refusal(err error) error {
	var verify *tls.CertificateVerificationError
	var alert *net.OpError
	switch {
	case backend.CertificateRefused(err):
		return fmt.Errorf("the server refused the client's certificate: %w", err)
	case errors.As(err, &alert) && alert.Op == "remote error":
		return fmt.Errorf("the server refused the TLS handshake: %w", err)
	case errors.As(err, &verify):
		return fmt.Errorf("the server's certificate does not verify: %w", err)
	}
	return nil
}

func (c *tlsCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if c.serverName != "" {
		authority = c.serverName
	}
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		c.w.check(err)
		return nil, nil, err
	}
	if !c.w.armed() {
		return conn, info, nil
	}
	return watchedConn{conn, c.w}, info, nil
}

func (c *tlsCreds) Clone() credentials.TransportCredentials {
	return &tlsCreds{c.TransportCredentials.Clone(), c.serverName, c.w}
}

// watchedConn passes the errors of its reads to its watch.
type watchedConn struct {
	net.Conn
	w *tlsWatch
}

func (c watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.w.check(err)
	}
	return n, err
}
