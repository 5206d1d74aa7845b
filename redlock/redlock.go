// Package redlock is the dlock backend for Redlock: a lock over N independent
// Redis masters (no replication between them), held while a majority of them
// (N/2+1) hold it, so that it survives the loss of a minority of the masters.
//
// Use it where a lock must outlive a Redis node and Sentinel or Cluster
// failover (package redislock) is not enough: their replication is
// asynchronous, so a failover can forget a held lock. Redlock costs N
// connections and two round trips per acquisition, and it makes timing
// assumptions (below) that a single store does not.
//
// # Store URLs
//
// Importing the package registers this with dlock.Open:
//
//	redlock://[user:pass@]host:port,host:port,host:port[?prefix=...&clock_bound=10s]
//
// with at least three hosts (an odd number is best: a fourth master adds no
// tolerance to three). Every master takes the same user and password. The
// parameters are prefix (Options.Prefix), clock_bound (Options.ClockBound)
// and the TLS parameters of backend.TLSParams, which make Open speak TLS to
// every master. Open returns once a majority of the masters answer (a
// minority may be down). Each client given to New must reach one master (a
// *redis.Client), not a Cluster or a Ring.
//
// # Guarantees
//
//   - A lock is held while a majority of the masters confirmed it and its
//     validity, TTL − elapsed − drift (drift = TTL×1% + 2 ms by default,
//     Options.DriftFactor and Options.Drift), is positive, measured on the
//     client's monotonic clock; Done closes at 0.9×TTL, before it ends.
//   - A refresh succeeds only if a majority still held the lease when it
//     arrived, and re-creates the key on masters that lost it.
//   - Fencing tokens come from a high-water mark on each master, written
//     back to a majority before Acquire returns: they increase under any
//     step of any master's clock, as long as a majority of the masters keep
//     their data.
//   - A master restarted empty does not count toward a quorum until every
//     key it may have forgotten has expired (Options.MaxTTL + drift +
//     Options.ClockBound: 24h14m34s with the defaults; lower MaxTTL to
//     shorten it).
//   - Waiters are woken by the masters' release notifications, and retry
//     after a random delay when contenders split the votes.
//   - A minority of masters down does not delay a release: Release returns
//     once a majority freed the name. An acquisition waits for every
//     master's answer (the restart guard compares them all), up to
//     Options.NodeTimeout: a master whose port refuses connections costs
//     one failed dial (Open's clients neither retry a command nor redial),
//     a silent one (stopped, or cut off) the whole NodeTimeout.
//
// # Resume, Extend and lock-delay
//
//   - Locker.Resume runs one script on every master in parallel (one round
//     trip): where an attempt of the old owner holds the key with the
//     token, the key moves to the new owner with the same token and the new
//     lease. The hold is resumed if a majority moved it within the new
//     TTL's validity (TTL − elapsed − drift); otherwise what moved is given
//     back. The token names the key prefix (Scope), no address or password.
//   - Lock.Extend is the refresh of one lease with the new TTL: one round
//     trip to every master in parallel, held if a majority still held it.
//   - dlock.WithLockDelay: each master's key lives TTL+delay (PX) from each
//     acquisition and refresh, by that master's clock, while the validity
//     arithmetic stays on the TTL; a crashed holder's name is taken again
//     once a majority of its keys expired, TTL+delay after its last refresh
//     (less a master's clock running fast, as for any expiry). Release
//     deletes the keys at once.
//
// # Limits
//
//   - Exclusion rests on bounded clock drift, Redlock's own assumption: a
//     forward step of one master's clock beyond the drift allowance can end
//     the holder's key there, and if that master was one of exactly a
//     quorum that granted it, another client can win a quorum until the
//     holder's next refresh gives the lock up; a step on a majority always
//     can. Tokens still rise, so fenced storage refuses the earlier
//     holder's writes. Where a wall-clock step must never cost exclusion,
//     use redislock or a consensus store.
//   - When fewer than a quorum of the masters that answered count (down, or
//     restarted within the guard), Acquire fails with an error saying why,
//     not "held": nobody can take the name then.
//   - A new deployment, or a majority of masters restarted at once, cannot
//     be told apart from masters never seen before, so none is discounted;
//     run the masters with maxmemory-policy noeviction, since eviction that
//     loses recent writes without a restart is not detected.
//   - No shared locks or semaphores: Acquire with dlock.Shared or
//     dlock.WithLimit fails with dlock.ErrUnsupported.
//   - Acquire refuses a TTL above Options.MaxTTL.
//
// # Example
//
//	var clients []redis.UniversalClient
//	for _, addr := range []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"} {
//		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr}))
//	}
//	locker, err := redlock.New(clients, nil) // the Locker does not close the clients
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "billing/run")
//
// # Other clients
//
// Modules of their own run the same Locker on other clients, one per
// master, without adding them to a go-redis user's graph:
// rueidisredis.NewRedlock on rueidis clients and valkeyredis.NewRedlock on
// valkey-go clients (and the URLs redlock+rueidis:// and
// redlock+valkey://). Lockers on any of the clients share keys and names.
//
// Design: acquiring, renewal, why fencing tokens increase, the restart guard,
// which clock each promise depends on, why there are no shared locks, and
// the keys are described in DESIGN.md in this package's directory
// (redlock/DESIGN.md).
package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/goredisconn"
	"github.com/dlock-go/dlock/internal/redisconn"
)

const (
	// DefaultPrefix is Options.Prefix's default.
	DefaultPrefix = "redlock:"

	// DefaultDriftFactor is Options.DriftFactor's default.
	DefaultDriftFactor = 0.01

	// DefaultDrift is Options.Drift's default.
	DefaultDrift = 2 * time.Millisecond

	// DefaultMaxNodeTimeout bounds the default Options.NodeTimeout.
	DefaultMaxNodeTimeout = time.Second
)

// markTTL is how long a name's high-water mark outlives its last
// acquisition on a master.
const markTTL = 30 * 24 * time.Hour

// epochSlack is how much younger than the oldest answering master's epoch
// a master's must be for it to count as restarted.
const epochSlack = time.Second

// Options configures a Redlock Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every key and channel on every master.
	// Default: DefaultPrefix.
	Prefix string

	// NodeTimeout bounds each step on one master. A master that does not
	// answer within it counts as a refusal. It must not be negative.
	// Default: TTL/10, at most DefaultMaxNodeTimeout.
	NodeTimeout time.Duration

	// DriftFactor and Drift make the clock drift allowance, TTL ×
	// DriftFactor + Drift, taken off each lease's validity. They must
	// not be negative, DriftFactor must be below 0.05, and the allowance
	// below a tenth of driver.MinTTL (Drift < 10 ms − MinTTL×DriftFactor),
	// since the core gives up on a lock at 0.9×TTL.
	// Default: DefaultDriftFactor and DefaultDrift.
	DriftFactor float64
	Drift       time.Duration

	// MaxTTL is the longest TTL any client of these masters uses: a master
	// whose data is younger than MaxTTL plus drift plus ClockBound does
	// not count toward a quorum (see the package documentation), and Acquire with a longer
	// TTL fails with dlock.ErrInvalid. Lower it to shorten how long a
	// restarted master sits out. Default: driver.MaxTTL.
	MaxTTL time.Duration

	// ClockBound is the largest step of one master's wall clock, forward
	// or back, that the restart guard allows for: a master restarted
	// empty sits out MaxTTL + drift + ClockBound by its own clock, so
	// that a forward step of that clock by up to ClockBound after the
	// restart still leaves it out until every key it may have forgotten
	// has expired. It must not be negative. Default:
	// driver.DefaultClockBound (also when 0).
	ClockBound time.Duration

	// MaxRetryInterval bounds how long a waiter waits for a wake-up
	// before trying again. It must not be negative.
	// Default: driver.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker over independent Redis masters (no replication between them). A lock
// is held while a majority of them hold it.
//
// Each client must reach one master (a *redis.Client); there must be at
// least three, and an odd number is best. The Locker does not close them.
// A client that retries (go-redis's default: 3 retries of a failed
// command, 5 dials per connection) makes each step on a dead master last
// the per-master timeout; Open's clients set MaxRetries to -1 and
// DialerRetries to 1, since the other masters are Redlock's retry.
// A nil opts means defaults. Fewer than three clients, a nil one, one
// that is not a single node, or invalid Options get an error wrapping
// dlock.ErrInvalid.
func New(clients []redis.UniversalClient, opts *Options) (*dlock.Locker, error) {
	d, err := newGoRedisDriver(clients, opts)
	if err != nil {
		return nil, err
	}
	return d.locker(), nil
}

// newGoRedisDriver checks that each client is a non-nil *redis.Client and
// returns newDriver on them.
func newGoRedisDriver(clients []redis.UniversalClient, opts *Options) (*rlDriver, error) {
	conns := make([]redisconn.Conn, len(clients))
	for i, c := range clients {
		if cl, ok := c.(*redis.Client); !ok || cl == nil {
			return nil, fmt.Errorf("redlock: new: master %d is %T, want a non-nil *redis.Client: %w", i, c, dlock.ErrInvalid)
		}
		conns[i] = goredisconn.New(c)
	}
	return newDriver(conns, opts)
}

// locker returns a Locker over d, as New and Open make it.
func (d *rlDriver) locker() *dlock.Locker {
	return dlock.NewLocker(d, driver.LockerOptions{MaxRetryInterval: d.maxRetry})
}

// Key returns the key that holds the lock on name on each master, under
// prefix ("" means DefaultPrefix), for inspection and administrative
// deletion.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + "l:" + name
}

// rlDriver implements driver.Driver over the masters.
type rlDriver struct {
	masters     []redisconn.Conn
	quorum      int
	prefix      string
	nodeTimeout time.Duration // 0: TTL/10
	driftFactor float64
	drift       time.Duration
	maxTTL      time.Duration
	clockBound  time.Duration
	maxRetry    time.Duration
	own         bool // Close closes the masters' clients (Open made them)

	mu     sync.Mutex
	tokens map[string]held // by owner: each lease acquired here and not released
	seq    atomic.Uint64   // numbers acquisition attempts (see attemptOwner)
	steps  sync.WaitGroup  // steps each started, which may outlive it; Close waits

	// pause, if set, is called by Acquire after the token is written back
	// and before validity is checked (tests stop the process there).
	pause func()
}

// newDriver returns the driver on the masters' clients, one Conn each (a
// single node: not a Cluster).
func newDriver(clients []redisconn.Conn, opts *Options) (*rlDriver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("redlock: new: %w: %w", dlock.ErrInvalid, err)
	}
	if len(clients) < 3 {
		return nil, fmt.Errorf("redlock: new: %d masters, want at least 3: %w", len(clients), dlock.ErrInvalid)
	}
	for i, c := range clients {
		if c == nil || redisconn.IsCluster(c) {
			return nil, fmt.Errorf("redlock: new: master %d is nil or a Cluster, want a client on one node: %w", i, dlock.ErrInvalid)
		}
	}
	d := &rlDriver{
		masters: clients, quorum: len(clients)/2 + 1,
		prefix: o.Prefix, nodeTimeout: o.NodeTimeout,
		driftFactor: o.DriftFactor, drift: o.Drift, maxTTL: o.MaxTTL, clockBound: o.ClockBound, maxRetry: o.MaxRetryInterval,
		tokens: make(map[string]held),
	}
	if d.prefix == "" {
		d.prefix = DefaultPrefix
	}
	if opts == nil || (o.DriftFactor == 0 && o.Drift == 0) {
		d.driftFactor, d.drift = DefaultDriftFactor, DefaultDrift
	}
	if d.maxTTL == 0 {
		d.maxTTL = driver.MaxTTL
	}
	if d.clockBound == 0 {
		d.clockBound = driver.DefaultClockBound
	}
	return d, nil
}

// check reports what is wrong with o, if anything.
func (o Options) check() error {
	switch {
	case o.NodeTimeout < 0:
		return fmt.Errorf("negative NodeTimeout %v", o.NodeTimeout)
	case o.DriftFactor < 0 || o.DriftFactor >= 0.05:
		return fmt.Errorf("DriftFactor %v outside [0, 0.05)", o.DriftFactor)
	case o.Drift < 0:
		return fmt.Errorf("negative Drift %v", o.Drift)
	case o.Drift >= time.Duration(float64(driver.MinTTL)*(0.1-o.DriftFactor)):
		// The core closes Done at 0.9×TTL: the allowance must stay below
		// a tenth of every TTL, driver.MinTTL's included.
		return fmt.Errorf("a Drift of %v with DriftFactor %v is too large: the drift allowance must stay below a tenth of driver.MinTTL (%v)", o.Drift, o.DriftFactor, driver.MinTTL)
	case o.MaxTTL < 0 || o.MaxTTL > driver.MaxTTL:
		return fmt.Errorf("MaxTTL %v outside [0, %v]", o.MaxTTL, driver.MaxTTL)
	case o.MaxTTL > 0 && o.MaxTTL < driver.MinTTL:
		return fmt.Errorf("MaxTTL %v below driver.MinTTL %v", o.MaxTTL, driver.MinTTL)
	case o.ClockBound < 0:
		return fmt.Errorf("negative ClockBound %v", o.ClockBound)
	case o.MaxRetryInterval < 0:
		return fmt.Errorf("negative MaxRetryInterval %v", o.MaxRetryInterval)
	}
	return nil
}

// driftFor returns the clock drift allowance for a lease of ttl.
func (d *rlDriver) driftFor(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*d.driftFactor) + d.drift
}

// timeoutFor returns the per-master timeout of a step on a lease of ttl.
func (d *rlDriver) timeoutFor(ttl time.Duration) time.Duration {
	if d.nodeTimeout > 0 {
		return d.nodeTimeout
	}
	return min(ttl/10, DefaultMaxNodeTimeout)
}

// guard is how young a master's epoch must be to be discounted.
func (d *rlDriver) guard() time.Duration {
	return d.maxTTL + d.driftFor(d.maxTTL) + d.clockBound
}

func (d *rlDriver) lockKey(name string) string { return Key(d.prefix, name) }
func (d *rlDriver) markKey(name string) string { return d.prefix + "f:" + name }
func (d *rlDriver) epochKey() string           { return d.prefix + "epoch" }
func (d *rlDriver) channel(name string) string { return d.prefix + "w:" + name }
func (d *rlDriver) keys(name string) []string {
	return []string{d.lockKey(name), d.markKey(name), d.epochKey()}
}
func markSeconds() int64       { return int64(markTTL / time.Second) }
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// held is a lease acquired here: its token, and the owner its keys carry
// on the masters (see attemptOwner).
type held struct {
	token uint64
	key   string
}

func (d *rlDriver) token(owner string) held {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tokens[owner]
}
func (d *rlDriver) forget(owner string) { d.mu.Lock(); defer d.mu.Unlock(); delete(d.tokens, owner) }
func (d *rlDriver) remember(owner string, h held) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tokens[owner] = h
}

// attemptOwner returns l with an owner of its own for one acquisition
// attempt: the lease's owner, '#', and a number. The core retries an
// Acquire with the same owner; a give-back of an earlier attempt that
// reaches a master late (a stalled one) must not delete the key a later
// attempt set there and counted toward its quorum. Owner strings never
// contain '#'.
func (d *rlDriver) attemptOwner(l driver.Lease) driver.Lease {
	l.Owner += "#" + strconv.FormatUint(d.seq.Add(1), 36)
	return l
}

// each runs step on every master in parallel, each with its own timeout,
// and returns their outcomes in the masters' order once all are in, or
// once a quorum of them are outcomes that settled (if not nil) accepts, or
// the timeout has passed, whichever comes first: go-redis does not always
// honour a context (the handshake of a new connection to a stopped
// server, for one), and one stuck master must not hold up the others'
// answers, nor a dead minority an outcome a majority already decided
// (after a quorum settled, each gives the others as long again as the
// quorum took, so that healthy masters' answers are not left behind). A
// master that has not answered by then gets missing. The steps see ctx's
// cancellation until each returns, not after: a step that goes on (a slow
// master's) finishes, bounded by its timeout and ctx's deadline (Close
// waits for it), and its outcome is passed to late, if not nil (to give
// back what it took), from the step's goroutine.
func each[T any](ctx context.Context, d *rlDriver, timeout time.Duration, missing T, step func(ctx context.Context, i int, c redisconn.Conn) T, late func(i int, v T), settled func(i int, v T) bool) []T {
	out := make([]T, len(d.masters))
	for i := range out {
		out[i] = missing
	}
	sctx, cancel := stepContext(ctx, timeout)
	detach := context.AfterFunc(ctx, cancel)
	defer detach()
	var (
		mu       sync.Mutex
		returned bool
		pending  = len(d.masters)
		running  = len(d.masters)
		accepted int // outcomes settled accepts
		all      = make(chan struct{})
		quorum   = make(chan struct{}) // closed when accepted reaches d.quorum
		start    = time.Now()
	)
	for i, c := range d.masters {
		d.steps.Add(1)
		go func() { // ends when step returns, bounded by go-redis's own timeouts; Close waits
			defer d.steps.Done()
			v := step(sctx, i, c)
			mu.Lock()
			if running--; running == 0 {
				cancel()
			}
			if returned {
				mu.Unlock()
				if late != nil {
					late(i, v)
				}
				return
			}
			out[i] = v
			if settled != nil && settled(i, v) {
				if accepted++; accepted == d.quorum {
					close(quorum)
				}
			}
			if pending--; pending == 0 {
				close(all)
			}
			mu.Unlock()
		}()
	}
	await(start, timeout+eachGrace, all, quorum)
	mu.Lock()
	defer mu.Unlock()
	returned = true
	return slices.Clone(out)
}

// await returns when all is closed, or limit after start, or, once quorum
// is closed, when the time since start has passed again.
func await(start time.Time, limit time.Duration, all, quorum <-chan struct{}) {
	t := time.NewTimer(limit - time.Since(start))
	defer t.Stop()
	select {
	case <-all:
		return
	case <-t.C:
		return
	case <-quorum:
	}
	g := time.NewTimer(time.Since(start))
	defer g.Stop()
	select {
	case <-all:
	case <-t.C:
	case <-g.C:
	}
}

// stepContext returns the context of each's steps: ctx's values, and a
// deadline timeout from now or ctx's, whichever is earlier, but not ctx's
// cancellation (each passes that on while it waits).
func stepContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// eachGrace is how long past its timeout each waits for a step that has
// not returned.
const eachGrace = 10 * time.Millisecond

// retryDelay is a random delay before a contender that split the votes
// tries again: up to a tenth of the TTL, at most 50 ms.
func retryDelay(ttl time.Duration) time.Duration {
	span := min(ttl/10, 50*time.Millisecond)
	return time.Millisecond + rand.N(span)
}

// Classify implements driver.Classifier with the clients': the core maps
// refusals to dlock.ErrDenied, dlock.ErrNoSpace.
func (d *rlDriver) Classify(err error) driver.ErrorKind { return d.masters[0].Classify(err) }

// Backend names the store for hooks.
func (d *rlDriver) Backend() string { return "redlock" }

// Close closes the clients Open made, then waits for the steps that
// outlived their call (a stalled master's, bounded by the clients'
// timeouts): Watch subscriptions end with their stop funcs.
func (d *rlDriver) Close() error {
	var first error
	if d.own {
		for _, c := range d.masters {
			if err := c.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	d.steps.Wait()
	return first
}

// The optional interfaces rlDriver implements, checked at compile time.
var (
	_ driver.Notifier      = (*rlDriver)(nil)
	_ driver.Inspector     = (*rlDriver)(nil)
	_ driver.ForceReleaser = (*rlDriver)(nil)
	_ driver.Classifier    = (*rlDriver)(nil)
)
