package redlock

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/rediserr"
	"github.com/dlock-go/dlock/internal/goredis/redisquiet"
	"github.com/dlock-go/dlock/internal/redisconn"
)

func init() { backend.Register("redlock", open) }

// open makes a Locker for redlock://[user:pass@]host:port,host:port,...
// with at least three hosts, speaking TLS to every master with tls=true or
// any of the tls_ parameters (backend.TLSParams). It returns once a majority of the masters
// answer PING (a minority may be down), or fails when ctx ends first. The
// Locker closes the clients it creates.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, append([]string{"prefix", "clock_bound"}, backend.TLSParams...)...)
	if err != nil {
		return nil, err
	}
	opts := &Options{Prefix: q.Get("prefix")}
	if v := q.Get("clock_bound"); v != "" {
		if opts.ClockBound, err = time.ParseDuration(v); err != nil || opts.ClockBound < 0 {
			return nil, fmt.Errorf("%w: clock_bound %q is not a duration of 0 or more such as 10s", dlock.ErrBadURL, v)
		}
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return nil, fmt.Errorf("%w: redlock:// takes no path (got %q)", dlock.ErrBadURL, p)
	}
	hosts, err := backend.URLHosts(u, 6379)
	if err != nil {
		return nil, err
	}
	if len(hosts) < 3 {
		return nil, fmt.Errorf("%w: redlock:// needs at least 3 hosts, got %d", dlock.ErrBadURL, len(hosts))
	}
	// Each master's certificate must carry its own address unless
	// tls_server_name says otherwise (tls.Dial's default).
	tc, err := backend.TLSConfig(q, "", false)
	if err != nil {
		return nil, err
	}
	user, pass := u.User.Username(), backend.URLPassword(u)
	clients := make([]redis.UniversalClient, len(hosts))
	for i, h := range hosts {
		clients[i] = redis.NewClient(masterOptions(h, user, pass, tc))
		clients[i].AddHook(redisquiet.Hook{}) // go-redis logs nothing about them
	}
	d, err := newGoRedisDriver(clients, opts)
	if err != nil { // unreachable: the options are valid
		closeAll(clients)
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	d.own = true
	errs := each(ctx, d, 5*time.Second, errNoAnswer, func(ctx context.Context, _ int, c redisconn.Conn) error {
		return c.Pipeline(ctx, []redisconn.Cmd{{Name: []string{"ping"}}})[0].Err
	}, nil, func(_ int, err error) bool { return err == nil })
	up := 0
	var firstErr error
	for _, err := range errs {
		if err == nil {
			up++
		} else if firstErr == nil {
			firstErr = err
		}
	}
	if up < d.quorum {
		closeAll(clients)
		return nil, fmt.Errorf("redlock: connect: %d of %d masters answered, want %d: %w", up, len(clients), d.quorum, driver.StoreError(rediserr.Classifier{}, firstErr))
	}
	return d.locker(), nil
}

// masterOptions returns the options of the client Open makes for the
// master at addr. A step on a master is tried once, with one dial: the
// other masters' answers, not a retry, are Redlock's answer to a master
// that fails, and go-redis's defaults (3 retries of a command, 5 dials per
// connection, with pauses between them) would make each step on a dead
// master last its whole per-master timeout, and a Release wait for it.
func masterOptions(addr, user, pass string, tc *tls.Config) *redis.Options {
	return &redis.Options{
		Addr: addr, Username: user, Password: pass, TLSConfig: tc,
		ContextTimeoutEnabled: true, // the per-master timeout bounds each step
		MaxRetries:            -1,   // no retry of a failed command
		DialerRetries:         1,    // one dial per connection
	}
}

func closeAll(clients []redis.UniversalClient) {
	for _, c := range clients {
		c.Close()
	}
}
