package rueidisredis

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
	"github.com/dlock-go/dlock/redlock"
)

// redlockScheme is the Redlock URL scheme this package registers.
const redlockScheme = "redlock+rueidis"

func init() { backend.Register(redlockScheme, openRedlock) }

// openRedlock makes a Locker for
// redlock+rueidis://[user:pass@]host:port,host:port,...[?prefix=...&clock_bound=10s]
// with at least three masters, one rueidis client each, speaking TLS to
// every master with tls=true or any of the tls_ parameters
// (backend.TLSParams). Like redlock://, it returns once a majority of the
// masters answer PING (a minority may be down: their clients connect when
// they come back). The Locker closes the clients it creates.
func openRedlock(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, append([]string{"prefix", "clock_bound"}, backend.TLSParams...)...)
	if err != nil {
		return nil, err
	}
	opts := &redlock.Options{Prefix: q.Get("prefix")}
	if v := q.Get("clock_bound"); v != "" {
		if opts.ClockBound, err = time.ParseDuration(v); err != nil || opts.ClockBound < 0 {
			return nil, fmt.Errorf("%w: clock_bound %q is not a duration of 0 or more such as 10s", dlock.ErrBadURL, v)
		}
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return nil, fmt.Errorf("%w: %s:// takes no path (got %q)", dlock.ErrBadURL, redlockScheme, p)
	}
	hosts, err := backend.URLHosts(u, 6379)
	if err != nil {
		return nil, err
	}
	if len(hosts) < 3 {
		return nil, fmt.Errorf("%w: %s:// needs at least 3 hosts, got %d", dlock.ErrBadURL, redlockScheme, len(hosts))
	}
	// Each master's certificate must carry its own address unless
	// tls_server_name says otherwise (tls.Dialer's default).
	tc, err := backend.TLSConfig(q, "", false)
	if err != nil {
		return nil, err
	}
	var masters []redisconn.Conn
	for _, h := range hosts {
		// ForceSingleClient: a client even if the master is down now.
		// No retries: the other masters are Redlock's retry.
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{h}, Username: u.User.Username(),
			Password: backend.URLPassword(u), DisableCache: true, ForceSingleClient: true, DisableRetry: true, TLSConfig: tc})
		if c == nil {
			closeConns(masters)
			return nil, fmt.Errorf("rueidisredis: connect %s: %w", h, driver.StoreError(conn{}, err))
		}
		masters = append(masters, newConn(c, -1))
	}
	l, _, err := redisconn.NewRedlock(masters, opts, true)
	if err != nil { // unreachable: the options are valid
		closeConns(masters)
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	if err := pingQuorum(ctx, masters); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// pingQuorum returns nil once a majority of masters answered PING, each
// within 5 s, or the first error.
func pingQuorum(ctx context.Context, masters []redisconn.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	errs := make([]error, len(masters))
	var wg sync.WaitGroup
	for i, c := range masters {
		wg.Go(func() { errs[i] = c.Pipeline(ctx, []redisconn.Cmd{{Name: []string{"ping"}}})[0].Err })
	}
	wg.Wait()
	up := 0
	var first error
	for _, err := range errs {
		if err == nil {
			up++
		} else if first == nil {
			first = err
		}
	}
	if quorum := len(masters)/2 + 1; up < quorum {
		return fmt.Errorf("rueidisredis: connect: %d of %d masters answered, want %d: %w", up, len(masters), quorum, driver.StoreError(masters[0], first))
	}
	return nil
}

func closeConns(cs []redisconn.Conn) {
	for _, c := range cs {
		c.Close()
	}
}
