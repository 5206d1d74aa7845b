package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// LockInfo describes who holds a lock, as reported by Inspect.
type LockInfo struct {
	Name      string
	Owner     string        // the holder's owner string: Locker identity and acquisition number
	Fence     uint64        // the holder's fencing token
	Remaining time.Duration // lease left on the server, 0 if the store cannot tell
	Metadata  string        // what the holder passed to WithMetadata
	Shared    bool          // a shared hold (see Shared); false for an exclusive one
	Limit     int           // for a semaphore permit, the semaphore's limit (see WithLimit); 0 for a lock
	Delayed   bool          // the holder's lease ran out and the name is in its lock-delay (see WithLockDelay)
}

// Inspect reports the holders of names, or of every held name when none
// is given. Names that are free are left out. The error wraps
// ErrUnsupported if the backend cannot inspect.
func (l *Locker) Inspect(ctx context.Context, names ...string) ([]LockInfo, error) {
	in, ok := l.drv.(driver.Inspector)
	if !ok {
		return nil, errorf("dlock: inspect: %w", ErrUnsupported)
	}
	if err := l.usable(); err != nil {
		return nil, errorf("dlock: inspect: %w", err)
	}
	for _, n := range names {
		if err := driver.ValidateName(n); err != nil {
			return nil, errorf("dlock: inspect: %w", err)
		}
	}
	hs, err := call(l, ctx, func() ([]driver.Holder, error) { return in.Inspect(ctx, names) }, nil)
	err = l.storeError(err)
	if err != nil {
		return nil, errorf("dlock: inspect: %w", err)
	}
	infos := make([]LockInfo, len(hs))
	for i, h := range hs {
		infos[i] = LockInfo(h)
	}
	return infos, nil
}

// ForceRelease frees name whatever its owner and wakes its waiters: the
// administrator's override for a lock whose holder is stuck. The holder
// learns of it at its next renewal (its Done closes). It reports whether
// name was held; the error wraps ErrUnsupported if the backend cannot do
// it.
func (l *Locker) ForceRelease(ctx context.Context, name string) (bool, error) {
	fr, ok := l.drv.(driver.ForceReleaser)
	if !ok {
		return false, errorf("dlock: force release: %w", ErrUnsupported)
	}
	if err := l.usable(); err != nil {
		return false, errorf("dlock: force release: %w", err)
	}
	if err := driver.ValidateName(name); err != nil {
		return false, errorf("dlock: force release: %w", err)
	}
	held, err := call(l, ctx, func() (bool, error) { return fr.ForceRelease(ctx, name) }, nil)
	err = l.storeError(err)
	if err != nil {
		return false, errorf("dlock: force release %s: %w", quote(name), err)
	}
	l.wakeLocal(name)
	return held, nil
}

// Waiters reports how many acquisitions are queued for name in the store,
// from every process. On Redis, another Locker's exclusive waiters of one
// name wait in one line that counts as one (this Locker's count each; see
// redislock, Guarantees). The error wraps ErrUnsupported where the store
// does not queue waiters (memlock and the SQL stores).
func (l *Locker) Waiters(ctx context.Context, name string) (int, error) {
	wc, ok := l.drv.(driver.WaiterCounter)
	if !ok {
		return 0, errorf("dlock: waiters: %w", ErrUnsupported)
	}
	if err := l.usable(); err != nil {
		return 0, errorf("dlock: waiters: %w", err)
	}
	if err := driver.ValidateName(name); err != nil {
		return 0, errorf("dlock: waiters: %w", err)
	}
	n, err := call(l, ctx, func() ([]int, error) { return wc.Waiters(ctx, []string{name}) }, nil)
	err = l.storeError(err)
	if err == nil && len(n) != 1 {
		err = fmt.Errorf("driver returned %d counts for 1 name", len(n))
	}
	if err != nil {
		return 0, errorf("dlock: waiters %s: %w", quote(name), err)
	}
	return n[0], nil
}
