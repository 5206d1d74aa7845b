package zklock

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// DefaultSessionTimeout is the session timeout of connections made by
// dlock.Open for zk:// URLs without session_timeout.
const DefaultSessionTimeout = 10 * time.Second

func init() { backend.Register("zk", open) }

// open serves store URLs zk://host[:port][,host[:port]][/root] with the
// query parameters session_timeout (a Go duration; default
// DefaultSessionTimeout) and suspend_timeout (Options.SuspendTimeout). It
// connects, waits for a session, and makes a Locker that closes the
// connection.
func open(ctx context.Context, u *url.URL) (*dlock.Locker, error) {
	q, err := backend.URLParams(u, "session_timeout", "suspend_timeout")
	if err != nil {
		return nil, err
	}
	hosts, err := backend.URLHosts(u, 2181)
	if err != nil {
		return nil, err
	}
	session, err := durationParam(q.Get("session_timeout"), DefaultSessionTimeout)
	if err != nil {
		return nil, err
	}
	suspend, err := durationParam(q.Get("suspend_timeout"), 0)
	if err != nil {
		return nil, err
	}
	conn, events, err := zk.Connect(hosts, session, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, fmt.Errorf("zklock: connect: %w", err)
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				return newLocker(conn, &Options{Root: u.Path, SuspendTimeout: suspend}, true), nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zklock: connect to %v: %w", hosts, ctx.Err())
		}
	}
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
