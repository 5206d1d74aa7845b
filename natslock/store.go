package natslock

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errConflict is a compare-and-set that found the key at another revision:
// the step reads it again and retries.
var errConflict = errors.New("natslock: the key changed")

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
	e, err := d.kv.Get(ctx, d.key(name))
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
	var (
		n   uint64
		err error
	)
	if rev == 0 {
		n, err = d.kv.Create(ctx, d.key(name), st.encode())
	} else {
		n, err = d.kv.Update(ctx, d.key(name), st.encode(), rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, fmt.Errorf("%w: %w", errConflict, err)
	}
	return n, err
}
