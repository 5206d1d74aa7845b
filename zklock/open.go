package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// defaultSessionTimeout is the session timeout of connections made by
// dlock.Open for zk:// URLs without session_timeout.
const defaultSessionTimeout = 10 * time.Second

func init() { backend.Register("zk", open) }

// open serves store URLs zk://[user:password@]host[:port][,host[:port]][/prefix]
// with the query parameters session_timeout (a Go duration; default 10s)
// and suspend_timeout (Options.SuspendTimeout). It resolves the hosts,
// connects and waits for a session, giving up when ctx ends, and makes a
// Locker that closes the connection. The connection never logs.
//
// With user and password, the connection authenticates with the digest
// scheme as user:password (the zk client sends it again on every new
// connection and session), and every znode the Locker creates gets the
// ACL digestACL gives: everything for that identity, READ for anyone.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "session_timeout", "suspend_timeout")
	if err != nil {
		return nil, err
	}
	hosts, err := backend.URLHosts(u, 2181)
	if err != nil {
		return nil, err
	}
	timeout, err := durationParam(q.Get("session_timeout"), defaultSessionTimeout)
	if err != nil {
		return nil, err
	}
	suspend, err := durationParam(q.Get("suspend_timeout"), 0)
	if err != nil {
		return nil, err
	}
	if _, err := cleanPrefix(u.Path); err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	user, pass := u.User.Username(), backend.URLPassword(u)
	switch {
	case user == "" && pass != "":
		return nil, fmt.Errorf("%w: zk:// URL has a password but no user", dlock.ErrBadURL)
	case user != "" && pass == "":
		return nil, fmt.Errorf("%w: zk:// URL has user %q but no password (digest auth needs both)", dlock.ErrBadURL, user)
	}
	conn, err := connect(ctx, hosts, timeout)
	if err != nil {
		return nil, err
	}
	opts := &Options{Prefix: u.Path, SuspendTimeout: suspend}
	if user != "" {
		if err := addDigestAuth(ctx, conn, user, pass); err != nil {
			conn.Close()
			return nil, sessionlock.ConnectError(ctx, "zklock", hosts, err)
		}
		opts.ACL = digestACL(user, pass)
	}
	l, _, err := newLocker(conn, opts, true)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return l, nil
}

// addDigestAuth authenticates conn as user:pass with the digest scheme,
// giving up when ctx ends. The zk client re-sends the credentials on
// every new connection. ZooKeeper accepts any user:pass: a wrong password
// is another identity, which the ACLs of the owner's znodes keep out.
func addDigestAuth(ctx context.Context, conn *zk.Conn, user, pass string) error {
	_, err := sessionlock.Call(ctx, func() (struct{}, error) {
		return struct{}{}, conn.AddAuth("digest", []byte(user+":"+pass))
	})
	if err != nil {
		return fmt.Errorf("digest auth as %q: %w", user, err)
	}
	return nil
}

// digestACL is the ACL of the znodes a Locker opened with user:pass
// creates: every permission for the digest identity user:pass (so only
// it can create, delete or write their children), READ for anyone.
func digestACL(user, pass string) []zk.ACL {
	return append(zk.DigestACL(zk.PermAll, user, pass), zk.WorldACL(zk.PermRead)...)
}

// connect resolves hosts and connects to them, and returns the connection
// once it has a session, or an error wrapping ctx.Err() and the last
// failure if ctx ends first. The zk client does not take a context: its
// name lookups would take up to 3 s whatever ctx says, so connect does
// them itself.
func connect(ctx context.Context, hosts []string, timeout time.Duration) (*zk.Conn, error) {
	var addrs []string
	for _, hp := range hosts {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
		}
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return nil, sessionlock.ConnectError(ctx, "zklock", hosts, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	var dialed lastError
	conn, events, err := zk.Connect(addrs, timeout, zk.WithLogger(quiet{}), zk.WithDialer(BoundedDialer(timeout, dialed.dial)))
	if err != nil {
		return nil, sessionlock.ConnectError(ctx, "zklock", hosts, err)
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			err := errors.New("no session")
			if last := dialed.get(); last != nil {
				err = fmt.Errorf("no session (last attempt: %w)", last)
			}
			return nil, sessionlock.ConnectError(ctx, "zklock", hosts, err)
		}
	}
}

// lastError is the connection's dialer. It records the last dial's
// error, for the error of a connect that gives up, and closes the last
// connection it made before it makes the next one. go-zookeeper (v1.0.4)
// dials again after a session expired without closing the connection the
// server had just refused (its loop drops it on ErrSessionExpired), so a
// process paused past its session leaked that socket in CLOSE_WAIT until
// the garbage collector's finalizer ran: the fault suite's pause-holder
// found it, after Close, in every run. The library dials only once the
// last connection is done with, so closing it then is safe.
type lastError struct {
	mu   sync.Mutex
	err  error
	last net.Conn
}

func (l *lastError) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	l.mu.Lock()
	if l.last != nil {
		l.last.Close()
		l.last = nil
	}
	l.mu.Unlock()
	c, err := net.DialTimeout(network, addr, timeout)
	l.mu.Lock()
	l.err, l.last = err, c
	l.mu.Unlock()
	return c, err
}

func (l *lastError) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func durationParam(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %q is not a duration", dlock.ErrBadURL, s)
	}
	return d, nil
}

// quiet keeps the zk client from logging: a library returns errors.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
