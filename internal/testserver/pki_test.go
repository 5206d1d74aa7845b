package testserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"testing"

	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/internal/testserver"
)

// TestPKIHandshake checks the throwaway authority against Go's own TLS
// stack, with the client side built from URL parameters the way backends
// build it: the server's certificate verifies against tls_ca for
// 127.0.0.1, the server sees the client certificate's common name, and a
// client without tls_ca (system roots) is refused.
func TestPKIHandshake(t *testing.T) {
	p := testserver.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatalf("LoadX509KeyPair(server) = %v", err)
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("read CA %s: %v", p.CAFile, err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
	})
	if err != nil {
		t.Fatalf("tls.Listen = %v", err)
	}
	defer ln.Close()
	peers := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			cn := "-"
			if tc.Handshake() == nil {
				if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
					cn = pc[0].Subject.CommonName
				}
			}
			peers <- cn
			c.Close()
		}
	}()
	dial := func(q url.Values) error {
		cfg, err := backend.TLSConfig(q, "127.0.0.1", false)
		if err != nil {
			return err
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		return c.Handshake()
	}

	if err := dial(p.ClientParams()); err != nil {
		t.Fatalf("dial with tls_ca and a client certificate = %v", err)
	}
	if got := <-peers; got != "dlock" {
		t.Errorf("Got(server sees client) = %q, want dlock", got)
	}
	if err := dial(url.Values{"tls_ca": {p.CAFile}}); err != nil {
		t.Fatalf("dial with tls_ca = %v", err)
	}
	if got := <-peers; got != "-" {
		t.Errorf("Got(server sees client without certificate) = %q, want -", got)
	}
	var unknown x509.UnknownAuthorityError
	if err := dial(url.Values{"tls_server_name": {"127.0.0.1"}}); !errors.As(err, &unknown) {
		t.Errorf("Got(dial with the system's roots) = %v, want an unknown authority error", err)
	}
	<-peers
	if err := dial(url.Values{"tls_ca": {p.CAFile}, "tls_server_name": {"db.example.com"}}); err == nil {
		t.Errorf("Got(dial for another server name) = nil, want a name mismatch")
	}
	<-peers
	if err := dial(url.Values{"tls_insecure_skip_verify": {"true"}}); err != nil {
		t.Errorf("Got(dial with tls_insecure_skip_verify=true) = %v, want nil", err)
	}
	<-peers
}
