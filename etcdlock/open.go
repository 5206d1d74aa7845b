package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
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
// (Options.SessionTTL, a Go duration), compact_every
// (Options.CompactEvery, a Go duration; 0 is off) and backend.TLSParams (any of them
// makes etcd:// speak TLS too). It connects and grants the Locker's
// session lease, giving up when ctx ends, and makes a Locker that closes
// the client. The client never logs.
//
// Without tls_server_name, each endpoint's certificate must carry its
// host. A TLS refusal while open runs (a server certificate that does not
// verify, or the server refusing the client's certificate) fails at once,
// even if other endpoints would answer: it is a misconfiguration, not a
// passing fault. A wrong user or password, or the server refusing the
// client's certificate, gets an error wrapping dlock.ErrDenied.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, append([]string{"session_ttl", "compact_every"}, backend.TLSParams...)...)
	if err != nil {
		return nil, err
	}
	hosts, err := backend.URLHosts(u, 2379)
	if err != nil {
		return nil, err
	}
	opts, err := urlOptions(q)
	if err != nil {
		return nil, err
	}
	// No host: gRPC checks each endpoint's, unless tls_server_name says.
	tlsCfg, err := backend.TLSConfig(q, "", u.Scheme == "etcds")
	if err != nil {
		return nil, err
	}
	scheme := "http://"
	if tlsCfg != nil {
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
	// A TLS refusal ends the client's context (its authentication) and
	// opening's at once, with the refusal as their cause. The client's
	// context is otherwise never cancelled: Close ends the client.
	clientCtx, endClient := context.WithCancelCause(context.WithoutCancel(ctx))
	openCtx, endOpen := context.WithCancelCause(ctx)
	defer endOpen(nil)
	refused := func(err error) {
		// Opening's first: the end of the client's context returns
		// clientv3.New, whose error fail then reads as this refusal.
		endOpen(err)
		endClient(err)
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		Username:    u.User.Username(),
		Password:    backend.URLPassword(u),
		DialTimeout: dial,
		Context:     clientCtx,
		Logger:      zap.NewNop(),
	}
	watch := &tlsWatch{}
	if tlsCfg != nil {
		var creds *tlsCreds
		creds, watch = newTLSCreds(tlsCfg, refused)
		cfg.TLS = tlsCfg
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(creds)} // replaces cfg.TLS's
	}
	fail := func(err error) error {
		if cause := context.Cause(openCtx); cause != nil && ctx.Err() == nil {
			err = cause // a TLS refusal
		}
		return sessionlock.ConnectError(ctx, "etcdlock", hosts, driver.StoreError(errorKinds{}, err))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fail(err)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	opts.Prefix = prefix
	d, lcfg, err := newDriver(cli, opts, true)
	if err != nil {
		cli.Close()
		return nil, err
	}
	// Grant a session lease now, within ctx: an unreachable cluster
	// fails here rather than at the first acquisition.
	err = d.grantFirst(openCtx)
	watch.disarm()
	if err == nil && openCtx.Err() != nil {
		err = openCtx.Err() // refused before the watch was disarmed: cli is closing
	}
	if err != nil {
		err = dialHint(err, cli, hosts)
		d.Close() // closes cli
		return nil, fail(err)
	}
	return dlock.NewLocker(d, lcfg), nil
}

// dialHint adds to the error of an Open that timed out what the client's
// connection shows, which the client's own error (its context's) does
// not: a connection in TRANSIENT_FAILURE had its attempts fail (refused,
// reset, or ended in the TLS handshake) rather than go unanswered.
func dialHint(err error, cli *clientv3.Client, hosts []string) error {
	if !errors.Is(err, context.DeadlineExceeded) || cli.ActiveConnection().GetState() != connectivity.TransientFailure {
		return err
	}
	return fmt.Errorf("%w (each connection to %s failed: refused, reset or cut in its handshake; is etcd listening there, with this scheme?)", err, strings.Join(hosts, ","))
}

// urlOptions returns the Options that a store URL's query parameters
// session_ttl and compact_every set.
func urlOptions(q url.Values) (*Options, error) {
	var o Options
	var err error
	if s := q.Get("session_ttl"); s != "" {
		if o.SessionTTL, err = time.ParseDuration(s); err != nil || o.SessionTTL <= 0 {
			return nil, fmt.Errorf("%w: session_ttl %q is not a positive duration", dlock.ErrBadURL, s)
		}
	}
	if s := q.Get("compact_every"); s != "" {
		if o.CompactEvery, err = time.ParseDuration(s); err != nil || o.CompactEvery < 0 {
			return nil, fmt.Errorf("%w: compact_every %q is not a duration of 0 or more", dlock.ErrBadURL, s)
		}
	}
	return &o, nil
}
