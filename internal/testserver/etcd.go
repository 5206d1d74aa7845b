package testserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Etcd is a single-member etcd server started by StartEtcd. Its methods are
// safe for concurrent use.
type Etcd struct {
	bin  string
	dir  string // holds data/ and server.log; kept across restarts
	port int    // client port, kept across restarts
	peer int    // peer port, kept across restarts
	opts EtcdOptions
	tls  *tls.Config // for clients, nil without PKI

	server
}

// EtcdOptions configures the server StartEtcdWith starts. The zero value
// is StartEtcd's server: plain TCP, no authentication.
type EtcdOptions struct {
	// PKI, if set, makes the server serve its clients over TLS only
	// (https:// client URLs), with PKI's server certificate.
	PKI *PKI

	// ClientCertAuth makes the server demand a client certificate signed
	// by PKI's authority (--client-cert-auth --trusted-ca-file); with
	// authentication on, a request without a password token runs as the
	// user named by the certificate's common name. It needs PKI.
	ClientCertAuth bool

	// RootPassword, if set, makes the server authenticate its clients:
	// once it is healthy, StartEtcdWith adds the user root with this
	// password and the root role, and enables authentication. Client
	// then connects as root.
	RootPassword string

	// Args are extra command-line flags for the server, appended after
	// those StartEtcdWith sets, on every start (Restart included): for
	// example "--quota-backend-bytes=16777216" or
	// "--auto-compaction-retention=2s".
	Args []string
}

// StartEtcd starts a single-member etcd server (Debian's etcd-server
// package) on free loopback client and peer ports, with its data in a
// temporary directory, and returns once it reports itself healthy. The
// server is killed when the test ends. If etcd is not installed, StartEtcd
// skips the test (see Need).
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return StartEtcdWith(t, EtcdOptions{})
}

// StartEtcdWith is StartEtcd with TLS and authentication as opts says.
func StartEtcdWith(t testing.TB, opts EtcdOptions) *Etcd {
	t.Helper()
	if opts.ClientCertAuth && opts.PKI == nil {
		t.Fatal("testserver: EtcdOptions.ClientCertAuth needs a PKI")
	}
	e := &Etcd{bin: Need(t, "etcd", "etcd-server"), dir: t.TempDir(), opts: opts}
	e.tls = e.tlsConfig(t)
	e.server = server{name: "etcd", where: e.addr, start: e.startLocked}
	e.startAndStop(t)
	if opts.RootPassword != "" {
		e.enableAuth(t)
	}
	return e
}

// enableAuth adds the user root with the root role and enables
// authentication.
func (e *Etcd) enableAuth(t testing.TB) {
	t.Helper()
	c := e.connect(t, "", "")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.UserAdd(ctx, "root", e.opts.RootPassword); err != nil {
		t.Fatalf("etcd: add user root: %v", err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatalf("etcd: grant root the root role: %v", err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatalf("etcd: enable authentication: %v", err)
	}
}

// startLocked starts etcd over the data in e.dir, on e.port and e.peer if
// set and on free ports otherwise. e.mu must be held.
func (e *Etcd) startLocked(t testing.TB) {
	t.Helper()
	data := filepath.Join(e.dir, "data")
	args := func(port int) []string {
		if e.peer == 0 || e.port != port {
			e.peer = freePort(t, false)
		}
		client := e.scheme() + etcdAddr(port)
		peer := "http://" + etcdAddr(e.peer)
		a := []string{
			"--name", "default",
			"--data-dir", data,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", "default=" + peer,
			"--log-level", "warn",
		}
		if p := e.opts.PKI; p != nil {
			a = append(a, "--cert-file", p.ServerCert, "--key-file", p.ServerKey)
		}
		if e.opts.ClientCertAuth {
			a = append(a, "--client-cert-auth", "--trusted-ca-file", e.opts.PKI.CAFile)
		}
		return append(a, e.opts.Args...)
	}
	e.proc, e.port = launch(t, e.bin, e.dir, e.port, false, args, e.probe)
}

// scheme returns the scheme of the server's client URLs.
func (e *Etcd) scheme() string {
	if e.opts.PKI != nil {
		return "https://"
	}
	return "http://"
}

// tlsConfig makes the configuration of a TLS client of the server (one
// that trusts PKI's authority and shows PKI's client certificate), or nil
// if it does not speak TLS.
func (e *Etcd) tlsConfig(t testing.TB) *tls.Config {
	t.Helper()
	p := e.opts.PKI
	if p == nil {
		return nil
	}
	ca, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatalf("read %s: %v", p.CAFile, err)
	}
	c := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}
	c.RootCAs.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatalf("load the client certificate: %v", err)
	}
	c.Certificates = []tls.Certificate{cert}
	return c
}

// probe checks that the etcd on port reports itself healthy.
func (e *Etcd) probe(port, pid int) error {
	c := http.Client{Timeout: time.Second}
	if e.opts.PKI != nil {
		c.Transport = &http.Transport{TLSClientConfig: e.tls}
	}
	resp, err := c.Get(e.scheme() + etcdAddr(port) + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
		return fmt.Errorf("/health answered %s: %q", resp.Status, b)
	}
	return nil
}

func etcdAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// Addr returns the server's client address, "127.0.0.1:port". It stays the
// same across Restart.
func (e *Etcd) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr()
}

func (e *Etcd) addr() string { return etcdAddr(e.port) }

// Client returns a new etcd client for the server that logs nothing,
// closed when the test ends. Over TLS it trusts the PKI's authority and
// shows its client certificate; with authentication on it is root.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	user := ""
	if e.opts.RootPassword != "" {
		user = "root"
	}
	return e.ClientAs(t, user, e.opts.RootPassword)
}

// ClientAs is Client as user with password; an empty user sends no
// password, and the server takes the client certificate's common name
// as the user (with ClientCertAuth and authentication on).
func (e *Etcd) ClientAs(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	c := e.connect(t, user, password)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// connect returns a new client of the server as user.
func (e *Etcd) connect(t testing.TB, user, password string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.scheme() + e.Addr()},
		TLS:         e.tls,
		Username:    user,
		Password:    password,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("connect to etcd on %s as %q: %v", e.Addr(), user, err)
	}
	return c
}

// Watchers returns the number of watchers the server has, from its
// etcd_debugging_mvcc_watcher_total metric.
func (e *Etcd) Watchers(t testing.TB) int {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	if e.tls != nil {
		c.Transport = &http.Transport{TLSClientConfig: e.tls}
	}
	resp, err := c.Get(e.scheme() + e.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	const metric = "\netcd_debugging_mvcc_watcher_total "
	_, after, ok := strings.Cut(string(b), metric)
	line, _, _ := strings.Cut(after, "\n")
	n, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	if !ok || err != nil {
		t.Fatalf("etcd metrics lack %s", strings.TrimSpace(metric))
	}
	return int(n)
}
