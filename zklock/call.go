package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// cleanupTimeout bounds the deletion of children after the caller's
// context ended or at Close.
const cleanupTimeout = 5 * time.Second

func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}

// call runs one zk request and returns its result, or ctx's error as soon
// as ctx ends. The zk client has no contexts; a request abandoned this way
// finishes in its goroutine, which exits when the client answers it (the
// client bounds every request by its receive timeout, two thirds of the
// session timeout, or fails it when the connection closes).
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() { // exits when f returns; see above
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

type existsResult struct {
	ok   bool
	stat *zk.Stat
}

func (d *zkDriver) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	r, err := call(ctx, func() (existsResult, error) {
		ok, st, err := d.conn.Exists(path)
		return existsResult{ok, st}, err
	})
	return r.ok, r.stat, err
}

func (d *zkDriver) children(ctx context.Context, path string) ([]string, error) {
	return call(ctx, func() ([]string, error) {
		c, _, err := d.conn.Children(path)
		return c, err
	})
}

// delete deletes the child at path, which names its owner, so whatever
// version it has it is ours. A missing child is not an error.
func (d *zkDriver) delete(ctx context.Context, path string) error {
	_, err := call(ctx, func() (struct{}, error) {
		return struct{}{}, d.conn.Delete(path, -1)
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}
