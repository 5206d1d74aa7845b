package etcdlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

// dialTimeout bounds the authentication clientv3.New makes for a URL with
// a user, when ctx has no earlier deadline.
const dialTimeout = 10 * time.Second

func init() {
	backend.Register("etcd", open)
	backend.Register("etcds", open)
}

// open serves store URLs etcd://[user:pass@]host[:port][,host[:port]][/prefix]
// (etcds:// for TLS) with the query parameter session_ttl
// (Options.SessionTTL, a Go duration). It connects and grants the
// Locker's session lease, giving up when ctx ends, and makes a Locker
// that closes the client. The client never logs.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "session_ttl")
	if err != nil {
		return nil, err
	}
	hosts, err := backend.URLHosts(u, 2379)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if s := q.Get("session_ttl"); s != "" {
		if ttl, err = time.ParseDuration(s); err != nil || ttl <= 0 {
			return nil, fmt.Errorf("%w: session_ttl %q is not a positive duration", dlock.ErrBadURL, s)
		}
	}
	scheme := "http://"
	if u.Scheme == "etcds" {
		scheme = "https://"
	}
	endpoints := make([]string, len(hosts))
	for i, h := range hosts {
		endpoints[i] = scheme + h
	}
	if err := ctx.Err(); err != nil {
		return nil, sessionlock.ConnectError(ctx, "etcdlock", hosts, err)
	}
	// The client dials in the background; only an authentication (with a
	// user in the URL) blocks in clientv3.New, for DialTimeout.
	dial := dialTimeout
	if deadline, ok := ctx.Deadline(); ok {
		dial = max(min(dial, time.Until(deadline)), time.Millisecond)
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		Username:    u.User.Username(),
		Password:    backend.URLPassword(u),
		DialTimeout: dial,
		Context:     context.WithoutCancel(ctx),
		Logger:      zap.NewNop(),
	}
	if u.Scheme == "etcds" {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, sessionlock.ConnectError(ctx, "etcdlock", hosts, err)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	d, lcfg, err := newDriver(cli, &Options{Prefix: prefix, SessionTTL: ttl}, true)
	if err != nil {
		cli.Close()
		return nil, err
	}
	// Grant the session lease now, within ctx: an unreachable cluster
	// fails here rather than at the first acquisition.
	if _, err := d.session(ctx); err != nil {
		d.Close() // closes cli
		return nil, sessionlock.ConnectError(ctx, "etcdlock", hosts, err)
	}
	return backend.New(d, lcfg), nil
}
