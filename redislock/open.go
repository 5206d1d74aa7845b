package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
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
	q, err := backend.URLParams(u, append([]string{"prefix", "wait_replicas", "wait_timeout", "clock_bound"}, backend.TLSParams...)...)
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
	if v := q.Get("clock_bound"); v != "" {
		if opts.ClockBound, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("%w: clock_bound %q is not a duration such as 10s", dlock.ErrBadURL, v)
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
	// One host's name is the name its certificate must carry; with
	// several (and the nodes and masters they name), each connection's
	// is its own address's (tls.Dial's default).
	tlsHost := ""
	if u.Scheme == "redis" || u.Scheme == "rediss" {
		tlsHost = u.Hostname()
	}
	tc, err := backend.TLSConfig(q, tlsHost, u.Scheme == "rediss")
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
		client = redis.NewClient(&redis.Options{Addr: hosts[0], Username: user, Password: pass, DB: db, TLSConfig: tc, ContextTimeoutEnabled: true})
	case "redis+sentinel":
		if path == "" || strings.Contains(path, "/") {
			return nil, fmt.Errorf("%w: redis+sentinel:// needs the master name as its path, as in redis+sentinel://host:26379/mymaster", dlock.ErrBadURL)
		}
		client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: path, SentinelAddrs: hosts, Username: user, Password: pass,
			TLSConfig: tc, ContextTimeoutEnabled: true,
		})
	case "redis+cluster":
		if path != "" {
			return nil, fmt.Errorf("%w: redis+cluster:// takes no path (a cluster has one database)", dlock.ErrBadURL)
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: hosts, Username: user, Password: pass, TLSConfig: tc, ContextTimeoutEnabled: true})
		// WaitReplicas runs scripts on the node clients, which do not
		// share the cluster client's hooks.
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(redisquiet.Hook{}) })
		client = cc
	}
	client.AddHook(redisquiet.Hook{})
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, connectError(err, path, tc != nil)
	}
	if err := checkSubscribe(ctx, client, opts.Prefix); err != nil {
		client.Close()
		return nil, err
	}
	l, _, err := newLocker(client, opts, true)
	if err != nil {
		client.Close()
		return nil, err
	}
	return l, nil
}

// connectError is Open's error for a failed first PING. A database the
// server does not have ("ERR DB index is out of range", the answer to the
// SELECT a client sends as it connects) is an error in the URL, wrapping
// dlock.ErrBadURL: no retry will find it. A PING over TLS (overTLS) that
// timed out gets a hint: a server that speaks no TLS reads the client's
// handshake as the start of a command and never answers it.
func connectError(err error, path string, overTLS bool) error {
	if strings.Contains(err.Error(), "DB index is out of range") {
		return fmt.Errorf("%w: database %s is out of the server's range (its databases setting: 16 by default, 0 to 15)", dlock.ErrBadURL, path)
	}
	var ne net.Error
	if overTLS && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		err = fmt.Errorf("%w (no answer over TLS: the server may not speak TLS, or the host may drop packets)", err)
	}
	return fmt.Errorf("redislock: connect: %w", driver.StoreError(rediserr.Classifier{}, err))
}

// checkSubscribe subscribes to a channel under the prefix's grant
// channels and unsubscribes. A Locker hears of grants on such a channel,
// and a user not granted SUBSCRIBE on it would wait unwoken, finding its
// grants only at its next heartbeat: so Open refuses it at once, with an
// error wrapping dlock.ErrDenied.
func checkSubscribe(ctx context.Context, client redis.UniversalClient, prefix string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	ps := client.Subscribe(redisquiet.Context(ctx), (&redisDriver{prefix: prefix}).channelPrefix()+"open")
	defer ps.Close()
	if _, err := ps.Receive(redisquiet.Context(ctx)); err != nil {
		return fmt.Errorf("redislock: connect: subscribe: %w", driver.StoreError(rediserr.Classifier{}, err))
	}
	return nil
}
