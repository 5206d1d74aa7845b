package dlock

import (
	"context"
	"slices"
	"strings"
)

// AcquireAll takes every name, in a fixed global order so that two callers cannot deadlock,
// and returns one Lock per name in the order given. It takes all or nothing: on error,
// nothing is left held.
//
// The order is the names' byte order, whatever order they are given in.
// An empty list or a name given twice is an error wrapping ErrInvalid. The
// options apply to every name.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...Option) ([]*Lock, error) {
	if len(names) == 0 {
		return nil, errorf("dlock: acquire all: no names: %w", ErrInvalid)
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	for i := 1; i < len(order); i++ {
		if names[order[i]] == names[order[i-1]] {
			return nil, errorf("dlock: acquire all: %s given twice: %w", quote(names[order[i]]), ErrInvalid)
		}
	}
	locks := make([]*Lock, len(names))
	for _, i := range order {
		k, err := l.Acquire(ctx, names[i], opts...)
		if err != nil {
			// Free what was taken before returning, even if ctx has ended.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			for _, k := range locks {
				if k != nil {
					k.Release(rctx)
				}
			}
			cancel()
			return nil, err
		}
		locks[i] = k
	}
	return locks, nil
}
