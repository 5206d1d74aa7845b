package rueidisredis

import (
	"context"
	"fmt"
	"net/url"

	"github.com/redis/rueidis"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
	"github.com/dlock-go/dlock/redislock"
)

// scheme is the store URL scheme this package registers with dlock.Open.
const scheme = "redis+rueidis"

func init() { backend.Register(scheme, open) }

// open makes a Locker for redis+rueidis://[user:pass@]host[:port][/db]
// (a single node; the query parameter prefix is Options.Prefix), speaking
// TLS with tls=true or any of the tls_ parameters (backend.TLSParams).
// The Locker closes the client it creates.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, append([]string{"prefix"}, backend.TLSParams...)...)
	if err != nil {
		return nil, err
	}
	tc, err := backend.TLSConfig(q, u.Hostname(), false)
	if err != nil {
		return nil, err
	}
	v := *u
	v.Scheme, v.RawQuery = "redis", ""
	opt, err := rueidis.ParseURL(v.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrBadURL, err)
	}
	opt.DisableCache, opt.TLSConfig = true, tc
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("rueidisredis: connect: %w", driver.StoreError(conn{}, err))
	}
	c := newConn(client, opt.SelectDB)
	if err := client.Do(ctx, client.B().Ping().Build()).Error(); err != nil {
		client.Close()
		return nil, fmt.Errorf("rueidisredis: connect: %w", driver.StoreError(c, err))
	}
	l, _, err := redisconn.NewRedislock(c, &redislock.Options{Prefix: q.Get("prefix")}, true)
	if err != nil {
		client.Close()
		return nil, err
	}
	return l, nil
}
