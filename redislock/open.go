package redislock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/internal/redisquiet"
)

func init() {
	for _, scheme := range []string{"redis", "rediss", "redis+sentinel", "redis+cluster"} {
		backend.Register(scheme, open)
	}
}

// open makes a Locker for a store URL of the forms in the package
// documentation. The Locker closes the client it creates, which never
// writes to standard error (see internal/redisquiet).
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "prefix", "wait_replicas", "wait_timeout")
	if err != nil {
		return nil, err
	}
	opts := &Options{Prefix: q.Get("prefix")}
	if v := q.Get("wait_replicas"); v != "" {
		if opts.WaitReplicas, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("%w: wait_replicas %q is not a number", dlock.ErrBadURL, v)
		}
	}
	if v := q.Get("wait_timeout"); v != "" {
		if opts.WaitTimeout, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("%w: wait_timeout %q is not a duration such as 200ms", dlock.ErrBadURL, v)
		}
	}
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	defPort := 6379
	if u.Scheme == "redis+sentinel" {
		defPort = 26379
	}
	hosts, err := backend.URLHosts(u, defPort)
	if err != nil {
		return nil, err
	}
	user, pass := u.User.Username(), backend.URLPassword(u)
	path := strings.Trim(u.Path, "/")
	var client redis.UniversalClient
	switch u.Scheme {
	case "redis", "rediss":
		if len(hosts) > 1 {
			return nil, fmt.Errorf("%w: %s:// takes one host; use redis+cluster:// or redis+sentinel:// for several", dlock.ErrBadURL, u.Scheme)
		}
		db := 0
		if path != "" {
			if db, err = strconv.Atoi(path); err != nil || db < 0 {
				return nil, fmt.Errorf("%w: database %q is not a number", dlock.ErrBadURL, path)
			}
		}
		o := &redis.Options{Addr: hosts[0], Username: user, Password: pass, DB: db, ContextTimeoutEnabled: true}
		if u.Scheme == "rediss" {
			o.TLSConfig = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
		}
		client = redis.NewClient(o)
	case "redis+sentinel":
		if path == "" || strings.Contains(path, "/") {
			return nil, fmt.Errorf("%w: redis+sentinel:// needs the master name as its path, as in redis+sentinel://host:26379/mymaster", dlock.ErrBadURL)
		}
		client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: path, SentinelAddrs: hosts, Username: user, Password: pass,
			ContextTimeoutEnabled: true,
		})
	case "redis+cluster":
		if path != "" {
			return nil, fmt.Errorf("%w: redis+cluster:// takes no path (a cluster has one database)", dlock.ErrBadURL)
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: hosts, Username: user, Password: pass, ContextTimeoutEnabled: true})
		// WaitReplicas runs scripts on the node clients, which do not
		// share the cluster client's hooks.
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(redisquiet.Hook{}) })
		client = cc
	}
	client.AddHook(redisquiet.Hook{})
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("redislock: connect: %w", err)
	}
	l, err := newLocker(client, opts, true)
	if err != nil {
		client.Close()
		return nil, err
	}
	return l, nil
}
