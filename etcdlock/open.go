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
)

func init() {
	backend.Register("etcd", open)
	backend.Register("etcds", open)
}

// open serves store URLs etcd://[user:pass@]host[:port][,host[:port]][/prefix]
// (etcds:// for TLS) with the query parameter session_ttl
// (Options.SessionTTL, a Go duration). It makes a Locker that closes the
// client.
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
	for i, h := range hosts {
		hosts[i] = scheme + h
	}
	deadline, ok := ctx.Deadline()
	dial := 10 * time.Second
	if ok {
		dial = min(dial, time.Until(deadline))
	}
	cfg := clientv3.Config{
		Endpoints:   hosts,
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
		return nil, fmt.Errorf("etcdlock: connect: %w", err)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	l, err := newLocker(cli, &Options{Prefix: prefix, SessionTTL: ttl}, true)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return l, nil
}
