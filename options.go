package dlock

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock/driver"
)

// Option configures one Acquire or TryAcquire call.
type Option func(*acquireOptions)

type acquireOptions struct {
	ttl      time.Duration
	noRenew  bool
	metadata string
	shared   bool
	limit    int
	limitSet bool
	delay    time.Duration
}

// Shared returns an Option that takes the name in shared (read) mode. Any number of shared
// holders may hold a name together; an exclusive (default) holder excludes all others.
//
// An exclusive acquisition that waits is not overtaken by shared ones
// that arrive after it: on the stores that queue waiters (Redis,
// ZooKeeper, etcd) everyone is served in arrival order; on the others
// (memlock and the SQL stores) a waiting writer records its intent in the
// store, and shared acquisitions by others wait until it has had its turn
// (or its intent lapsed after its TTL, if it died waiting).
//
// Each shared hold has its own lease, renewal, Done and fencing token,
// above every token issued before on the name. Re-entering through a
// shared hold's Context with Shared re-enters it; asking for the name
// exclusively there is an upgrade, which deadlocks two readers that both
// try it, so it fails with ErrInvalid: release, then acquire
// exclusively. Asking for Shared inside an exclusive hold re-enters the
// exclusive hold (it already keeps writers out); there is no in-place
// downgrade.
//
// A name is either a lock (exclusive and shared holds) or a semaphore
// (WithLimit); Shared on a semaphore's name fails with ErrInvalid, and so
// does Shared combined with WithLimit. It needs a backend that implements
// it (all of dlock's do); otherwise the error wraps ErrUnsupported.
func Shared() Option {
	return func(o *acquireOptions) { o.shared = true }
}

// WithLimit returns an Option that makes the name a counting semaphore of n permits (n >= 1):
// up to n holders at once, each a *Lock with its own lease, renewal, Done and fence.
//
// Every holder of a semaphore must give the same n: an acquisition with
// another limit, or without WithLimit, while the name has holders fails
// with ErrInvalid, and so does WithLimit while the name is held as a lock.
// A permit is re-entered through its Lock's Context with the same limit;
// any other mode there fails with ErrInvalid. Waiters are served in
// arrival order on the stores that queue (Redis, ZooKeeper, etcd).
func WithLimit(n int) Option {
	return func(o *acquireOptions) { o.limit, o.limitSet = n, true }
}

// WithMetadata stores a short description of the holder with the lock
// (for example "host=web1 pid=4242"), which Inspect and "dlock status"
// show, on backends that can store it. It must be valid UTF-8 without NUL
// bytes (PostgreSQL's text cannot hold them), of at most 1024
// bytes. Default: none.
func WithMetadata(s string) Option {
	return func(o *acquireOptions) { o.metadata = s }
}

// WithTTL sets the lease length: the lock expires on the server this long
// after it was taken or last renewed. It must be between 100ms and
// 24h. Default: 30s.
func WithTTL(d time.Duration) Option {
	return func(o *acquireOptions) { o.ttl = d }
}

// WithLockDelay returns an Option that keeps the name from being taken
// again for d after this hold's lease runs out unrenewed (its holder
// crashed, hung or lost the store), as Chubby's and Consul's lock-delay
// do: storage that cannot check fencing tokens gets d more for a holder
// that believes it still holds to notice, or die. A Release frees the
// name at once, and so does Locker.Close; a holder that finds its lock
// lost does not release it early either. The delay runs on the store's
// terms, as the lease does: the store keeps the hold for TTL+d after each
// renewal, measured by the clock that measures its leases (see each
// backend's clock bounds), and Inspect reports a name in its delay with
// LockInfo.Delayed. d must be in [0, 1h]; 0 means none. A
// backend that cannot keep a name past its holder's lease gives an error
// wrapping ErrUnsupported (ZooKeeper: a crashed holder's node goes with
// its session). Re-entering keeps the acquisition's delay.
func WithLockDelay(d time.Duration) Option {
	return func(o *acquireOptions) { o.delay = d }
}

// WithoutRenewal turns off automatic renewal: the lease ends TTL after
// acquisition unless Lock.Refresh is called, and Lock.Done closes shortly
// before it ends. Default: locks are renewed every TTL/3 until released.
func WithoutRenewal() Option {
	return func(o *acquireOptions) { o.noRenew = true }
}

// build sets o from opts and checks the result; o is usually part of a
// heap-allocated attempt, since calling an Option makes it escape.
func (o *acquireOptions) build(opts []Option) error {
	*o = acquireOptions{ttl: driver.DefaultTTL}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if o.ttl < driver.MinTTL || o.ttl > driver.MaxTTL {
		return fmt.Errorf("ttl %v out of range [%v, %v]: %w", o.ttl, driver.MinTTL, driver.MaxTTL, ErrInvalid)
	}
	if len(o.metadata) > driver.MaxMetadataLen || !utf8.ValidString(o.metadata) || strings.IndexByte(o.metadata, 0) >= 0 {
		return fmt.Errorf("metadata must be valid UTF-8 without NUL bytes, of at most %d bytes: %w", driver.MaxMetadataLen, ErrInvalid)
	}
	if o.limitSet && o.limit < 1 {
		return fmt.Errorf("semaphore limit %d: want at least 1: %w", o.limit, ErrInvalid)
	}
	if o.delay < 0 || o.delay > driver.MaxLockDelay {
		return fmt.Errorf("lock-delay %v out of range [0, %v]: %w", o.delay, driver.MaxLockDelay, ErrInvalid)
	}
	if o.shared && o.limitSet {
		return fmt.Errorf("Shared cannot be combined with WithLimit: %w", ErrInvalid)
	}
	return nil
}
