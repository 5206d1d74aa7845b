package natslock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errConflict is a compare-and-set that found the key at another revision:
// the step reads it again and retries.
var errConflict = errors.New("natslock: the key changed")

// requestTimeout bounds each request a step sends to the server (a read
// or a write of a key), below the caller's context. The server may never
// answer one: a stream's requests are served by its leader alone, and a
// request that reached the leader as it died, or reached a replica that
// still takes the dead server for the leader, gets no reply at all.
// Without this bound the step, and a waiter's Acquire with it, would wait
// for the caller's context to end (minutes, or never) while the cluster
// elected a new leader in seconds (TestClusterLeaderKilled: both waiters'
// reads of the key hung for the whole of their 2 minutes). It is
// JetStream's own default for a context without a deadline. This is a
// deadline on one request, not a retry: the step fails with errNoReply.
const requestTimeout = 5 * time.Second

// errNoReply is the error of a request that got no reply within
// requestTimeout: a write may or may not have been applied. It wraps
// nats.ErrTimeout, a transient error (see Classify): another attempt may
// reach a new leader.
var errNoReply = fmt.Errorf("no reply from the server within %v: %w", requestTimeout, nats.ErrTimeout)

// bounded runs f, one request to the server, on ctx bounded by
// requestTimeout. A request that requestTimeout cut short (not ctx)
// fails with errNoReply.
func bounded[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithTimeoutCause(ctx, requestTimeout, errNoReply)
	defer cancel()
	v, err := f(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(rctx), errNoReply) {
		return v, errNoReply
	}
	return v, err
}

// Key returns the bucket key that holds the lock name under prefix ("":
// DefaultPrefix): the prefix, then the name in unpadded base64url, whose
// characters are all valid in a key.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + base64.RawURLEncoding.EncodeToString([]byte(name))
}

func (d *natsDriver) key(name string) string { return Key(d.prefix, name) }

// name returns the lock name of a bucket key, and whether key is one.
func (d *natsDriver) name(key string) (string, bool) {
	enc, ok := strings.CutPrefix(key, d.prefix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	return string(b), err == nil && len(b) > 0
}

// read returns name's state and the revision of its key (0 when the key
// does not exist or was deleted).
func (d *natsDriver) read(ctx context.Context, name string) (state, uint64, error) {
	st, rev, _, err := d.readAt(ctx, name)
	return st, rev, err
}

// readAt is read that also returns when the server wrote the revision,
// by its wall clock (zero without a key).
func (d *natsDriver) readAt(ctx context.Context, name string) (state, uint64, time.Time, error) {
	e, err := bounded(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return d.kv.Get(ctx, d.key(name))
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return state{}, 0, time.Time{}, nil
	}
	if err != nil {
		return state{}, 0, time.Time{}, err
	}
	st, err := decode(e.Value(), e.Revision())
	return st, e.Revision(), e.Created(), err
}

// write stores st as name's state if its key is still at revision rev (0:
// does not exist), and returns the new revision; errConflict if the key
// changed.
func (d *natsDriver) write(ctx context.Context, name string, st *state, rev uint64) (uint64, error) {
	n, err := bounded(ctx, func(ctx context.Context) (uint64, error) {
		if rev == 0 {
			return d.kv.Create(ctx, d.key(name), st.encode())
		}
		return d.kv.Update(ctx, d.key(name), st.encode(), rev)
	})
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: %w", errConflict, err)
	}
	return n, err
}
