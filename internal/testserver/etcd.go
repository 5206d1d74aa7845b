package testserver

import (
	"fmt"
	"io"
	"net"
	"net/http"
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

	server
}

// StartEtcd starts a single-member etcd server (Debian's etcd-server
// package) on free loopback client and peer ports, with its data in a
// temporary directory, and returns once it reports itself healthy. The
// server is killed when the test ends. If etcd is not installed, StartEtcd
// skips the test (see Need).
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	e := &Etcd{bin: Need(t, "etcd", "etcd-server"), dir: t.TempDir()}
	e.server = server{name: "etcd", where: e.addr, start: e.startLocked}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.startLocked(t)
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if err := e.proc.kill(); err != nil {
			t.Errorf("stop etcd on %s: %v", e.addr(), err)
		}
	})
	return e
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
		client := "http://" + etcdAddr(port)
		peer := "http://" + etcdAddr(e.peer)
		return []string{
			"--name", "default",
			"--data-dir", data,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", "default=" + peer,
			"--log-level", "warn",
		}
	}
	e.proc, e.port = launch(t, e.bin, e.dir, e.port, false, args, probeEtcd)
}

// probeEtcd checks that the etcd on port reports itself healthy.
func probeEtcd(port, pid int) error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + etcdAddr(port) + "/health")
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
// closed when the test ends.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Addr()},
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("connect to etcd on %s: %v", e.Addr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Watchers returns the number of watchers the server has, from its
// etcd_debugging_mvcc_watcher_total metric.
func (e *Etcd) Watchers(t testing.TB) int {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + e.Addr() + "/metrics")
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
