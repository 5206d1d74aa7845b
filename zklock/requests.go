package zklock

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/internal/sessionlock"
)

// The zk client takes no contexts: every request goes through
// sessionlock.Call, which returns as soon as ctx ends. A request abandoned
// this way is bounded by the client, which fails it after its receive
// timeout (two thirds of the session timeout) or when the connection
// closes.

type existsResult struct {
	ok   bool
	stat *zk.Stat
}

func (d *zkDriver) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	r, err := sessionlock.Call(ctx, func() (existsResult, error) {
		ok, st, err := d.conn.Exists(path)
		return existsResult{ok, st}, err
	})
	return r.ok, r.stat, err
}

func (d *zkDriver) children(ctx context.Context, path string) ([]string, error) {
	return sessionlock.Call(ctx, func() ([]string, error) {
		c, _, err := d.conn.Children(path)
		return c, err
	})
}

// delete deletes the child at path, which names its owner, so whatever
// version it has it is ours. A missing child is not an error.
func (d *zkDriver) delete(ctx context.Context, path string) error {
	_, err := d.deleteOwned(ctx, path)
	return err
}

// deleteOwned deletes the child at path and reports whether it existed.
func (d *zkDriver) deleteOwned(ctx context.Context, path string) (bool, error) {
	_, err := sessionlock.Call(ctx, func() (struct{}, error) {
		return struct{}{}, d.conn.Delete(path, -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	return err == nil, err
}
