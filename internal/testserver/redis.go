package testserver

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a redis-server process started by StartRedis. Its methods are
// meant to be called from the test goroutine, but they are safe for
// concurrent use.
type Redis struct {
	bin  string // path of redis-server
	dir  string // temporary directory holding one subdirectory per run
	port int    // kept across restarts
	opts RedisOptions

	server
	runs int // number of times the server has been started
}

// StartRedis starts a standalone redis-server without persistence on a free
// loopback port and waits until it answers PING. The server is killed when
// the test and its subtests have finished, even if the test panics. If
// redis-server is not installed, StartRedis skips the test (see Need).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return StartRedisWith(t, RedisOptions{})
}

// RedisOptions configure a server started by StartRedisWith. The zero
// value is StartRedis's server: no password, no TLS, every client the
// default user with every right.
type RedisOptions struct {
	// Password, if set, is the default user's password (requirepass):
	// clients must authenticate. Client and the startup probe do.
	Password string

	// Users are ACL users the server starts with, each the user's name
	// followed by its rules, as after ACL SETUSER, separated by spaces:
	// "locker on >secret ~d{* &dw:* +evalsha". The default user
	// keeps every right.
	Users []string

	// PKI, if set, makes the server speak TLS only (no plain port), with
	// PKI's server certificate. Client and the startup probe trust
	// PKI's authority.
	PKI *PKI

	// ClientCerts makes a TLS server demand a client certificate signed
	// by PKI's authority (tls-auth-clients yes). Client and the startup
	// probe present PKI's client certificate.
	ClientCerts bool

	// Clock, if not nil, is the server's wall clock (TIME, and the
	// expiry of keys), which the test steps (see Clock). Default: the
	// host's.
	Clock *Clock

	// Persistent makes the server keep its data across Restart in an
	// append-only file written before each reply (appendonly yes,
	// appendfsync always). Default: no persistence; Restart starts
	// empty.
	Persistent bool
}

// StartRedisWith is StartRedis for a server configured by o: with a
// password, ACL users, or TLS.
func StartRedisWith(t testing.TB, o RedisOptions) *Redis {
	t.Helper()
	if o.ClientCerts && o.PKI == nil {
		t.Fatal("StartRedisWith: ClientCerts needs a PKI")
	}
	r := &Redis{bin: Need(t, "redis-server", "redis-server"), dir: t.TempDir(), opts: o}
	r.server = server{name: "redis-server", where: r.addr, start: r.startLocked}
	r.startAndStop(t)
	return r
}

// StartRedisMasters starts n servers configured by o, independent masters
// for Redlock, and returns their addresses.
func StartRedisMasters(t testing.TB, n int, o RedisOptions) []string {
	t.Helper()
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = StartRedisWith(t, o).Addr()
	}
	return hosts
}

// startLocked starts a new, empty server in a fresh directory, on r.port if
// it is set and on a free port otherwise. r.mu must be held.
func (r *Redis) startLocked(t testing.TB) {
	t.Helper()
	r.runs++
	dir := filepath.Join(r.dir, fmt.Sprintf("run%d", r.runs))
	if r.opts.Persistent {
		dir = filepath.Join(r.dir, "data")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create redis-server directory: %v", err)
	}
	args := func(port int) []string { return r.opts.args(redisArgs(port, dir)) }
	r.proc, r.port = launchEnv(t, r.bin, dir, r.port, false, args, r.opts.probe, r.opts.Clock.env())
}

// args returns the command line base amended for o.
func (o RedisOptions) args(base []string) []string {
	if o.Persistent {
		base = append(base, "--appendonly", "yes", "--appendfsync", "always")
	}
	if o.Password != "" {
		base = append(base, "--requirepass", o.Password)
	}
	for _, u := range o.Users {
		base = append(append(base, "--user"), strings.Fields(u)...)
	}
	if o.PKI != nil {
		// The last --port wins: the plain port is off, and the TLS port
		// takes the port redisArgs was given.
		port := base[slices.Index(base, "--port")+1]
		auth := "no"
		if o.ClientCerts {
			auth = "yes"
		}
		base = append(base, "--port", "0", "--tls-port", port,
			"--tls-cert-file", o.PKI.ServerCert, "--tls-key-file", o.PKI.ServerKey,
			"--tls-ca-cert-file", o.PKI.CAFile, "--tls-auth-clients", auth)
	}
	return base
}

// tlsConfig returns the TLS configuration of a client that the server
// accepts, or nil for a server without TLS.
func (o RedisOptions) tlsConfig() *tls.Config {
	if o.PKI == nil {
		return nil
	}
	c := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	ca, err := os.ReadFile(o.PKI.CAFile)
	if err == nil {
		c.RootCAs.AppendCertsFromPEM(ca)
	}
	if o.ClientCerts {
		if cert, err := tls.LoadX509KeyPair(o.PKI.ClientCert, o.PKI.ClientKey); err == nil {
			c.Certificates = []tls.Certificate{cert}
		}
	}
	return c
}

// probe is probeRedis over the connection o's server accepts.
func (o RedisOptions) probe(port, pid int) error {
	return probeRedisConn(port, pid, o.tlsConfig(), o.Password)
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (r *Redis) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr()
}

func (r *Redis) addr() string { return redisAddr(r.port) }

// URL returns a dlock store URL for the server as user with password
// (either may be empty: no password in the URL, or the default user): redis://, or for a TLS server rediss:// with
// tls_ca, and tls_cert and tls_key if it demands client certificates.
func (r *Redis) URL(user, password string) string {
	u := &url.URL{Scheme: "redis", Host: r.Addr()}
	switch {
	case password != "":
		u.User = url.UserPassword(user, password)
	case user != "":
		u.User = url.User(user)
	}
	if o := r.opts; o.PKI != nil {
		u.Scheme = "rediss"
		q := url.Values{"tls_ca": {o.PKI.CAFile}}
		if o.ClientCerts {
			q.Set("tls_cert", o.PKI.ClientCert)
			q.Set("tls_key", o.PKI.ClientKey)
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Client returns a new go-redis client for the server as its default
// user (with the password and TLS client configuration the server
// demands), closed when the test ends.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.opts.Password, TLSConfig: r.opts.tlsConfig()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisArgs returns the redis-server command line shared by standalone
// servers and cluster nodes: no persistence, loopback only, logging to
// stdout (which launch sends to server.log).
func redisArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--logfile", "",
	}
}

func redisAddr(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// probeRedis sends PING and INFO server to 127.0.0.1:port and checks that the
// answer is PONG and comes from the process pid, not from another server
// that happens to use the port.
func probeRedis(port, pid int) error { return probeRedisConn(port, pid, nil, "") }

// probeRedisConn is probeRedis over TLS if tc is set, authenticating with
// password first if it is set.
func probeRedisConn(port, pid int, tc *tls.Config, password string) error {
	d := &net.Dialer{Timeout: time.Second}
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = tls.DialWithDialer(d, "tcp", redisAddr(port), tc)
	} else {
		conn, err = d.Dial("tcp", redisAddr(port))
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	req := "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"
	if password != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password) + req
	}
	if _, err := io.WriteString(conn, req); err != nil {
		return err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	if password != "" {
		if line != "+OK\r\n" {
			return fmt.Errorf("AUTH answered %q", strings.TrimSpace(line))
		}
		if line, err = rd.ReadString('\n'); err != nil {
			return err
		}
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = rd.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(rd, info); err != nil {
		return err
	}
	if !strings.Contains("\n"+string(info), "\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("127.0.0.1:%d is served by another process than %d", port, pid)
	}
	return nil
}
