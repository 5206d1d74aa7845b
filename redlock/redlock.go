// Package redlock is the dlock backend for Redlock: a lock over N
// independent Redis masters (no replication between them), held while a
// majority of them (N/2+1) hold it, so that it survives the loss of a
// minority of the masters.
//
// Use it where a lock must outlive a Redis node and Sentinel or Cluster
// failover (package redislock) is not enough: their replication is
// asynchronous, so a failover can forget a held lock. Redlock costs N
// connections and two round trips per acquisition, and it makes timing
// assumptions (below) that a single store does not.
//
// # Acquiring
//
// Acquire runs a script on every master in parallel, each bounded by the
// per-master timeout (Options.NodeTimeout, well below the TTL), and waits
// for every master's answer within it, also after a majority has granted:
// the more masters hold the lock, the more of them may fail later. A
// master grants if the name is free there. With grants from a majority
// the driver writes the fencing token back (below), and the lock is held
// if a majority confirmed it and validity = TTL − elapsed − drift is
// still positive, elapsed measured on the monotonic clock from when the
// first request was sent, drift = TTL×Options.DriftFactor +
// Options.Drift (1% + 2 ms by default: how much faster than ours a
// master's clock may run). Otherwise it releases on every master, even
// those that did not answer, before returning. The core measures the
// lease from before the first request, so Done closes at 0.9×TTL after
// it, before the validity ends (drift is below 0.1×TTL for every TTL
// dlock accepts).
//
// Waiters are woken by the masters' release notifications (a pub/sub
// channel per name on each master; a Watch holds one connection per
// master), and otherwise retry when a majority of the holder's leases
// have run out. When nobody holds a majority (contenders split the
// votes), each gives its grants back and retries after a random delay;
// the wake-up its give-back sends is delivered after a random delay too,
// so that contenders do not collide again in step.
//
// # Renewal
//
// A refresh extends the lease on every master in one pipeline per master
// where the key carries the lease's owner and token (driver.Lease.Fence,
// when the core sets it), and re-creates the key, with its token, on
// masters where it is gone (a
// master restarted empty, or an expiry). It succeeds only if a majority
// still held the lease when it arrived: a key re-created on a master
// where the name was free does not count, since another owner may have
// held a majority meanwhile. Otherwise the refresh reports the lock not
// held (and takes back what it re-created), or an error when too few
// masters answered; the core closes Done at 0.9×TTL after the last
// refresh that succeeded, measured from when it was sent, which is before
// the keys on that refresh's majority expire (TTL − drift after it was
// sent).
//
// # Fencing tokens
//
// Each master keeps, per name, a high-water mark: the highest token
// written back on it. A master that grants returns one above its mark
// (and at least its clock in µs); the new token is the highest candidate
// of the masters that granted, and Acquire writes it, owner-checked, into
// the lock and the marks of a majority before it returns.
//
// Why they increase: holder A returned token t only after t was in the
// marks of a majority W, each write made while A still held the key
// there. A later holder B was granted by a majority G, which meets W in
// some master m; m granted B after A's key on m ended, so after A's write,
// so m's candidate, and B's token, is above t. This assumes that a
// majority of the masters keep their data (a master that restarted empty
// within the longest TTL is discounted, see below); the order of the
// steps on m, not a clock, does the rest, so clocks enter only through
// that restart guard (see Clocks). The marks expire after 30 days without an
// acquisition of their name (so idle names cost nothing forever); after
// that, tokens still increase while the masters' clocks differ by less
// than 30 days, since a candidate is at least the master's clock in µs.
//
// # Restarted masters
//
// A master that restarts empty forgets the keys it held: the previous
// holder may then hold on only a minority, and without a defence another
// client could win a majority with the restarted master's vote while the
// first still believes it holds (the central objection to Redlock). The
// defence: each master keeps an epoch, the time its data set began by its
// own clock (written by the scripts with the server's run id, so a
// restart, with or without persistence, or a FLUSHALL starts a new one),
// and every script reports its age. The reference age is the quorum-th
// youngest of the A answers (the (A−quorum+1)-th oldest). A master whose
// epoch is younger than the guard, Options.MaxTTL + drift +
// Options.ClockBound (24h14m34s with the defaults), and more than a
// second younger than the reference does not count toward a quorum (it
// still gets the key), so by the time it counts, every key it may have
// forgotten has expired. Acquire refuses a TTL above MaxTTL. When fewer
// than a quorum of the masters that answered count, Acquire fails with an
// error saying how many counted and why, not with "held": nobody can
// take the name then, free or not.
//
// The reference is chosen so that a minority cannot move it: if at most
// N − quorum masters are faulty in any way (restarted, not answering, or
// with a clock stepped either way by any amount), at most A − quorum of
// the answers are, so it is the age of a master that is not, and every
// healthy master counts (their epochs began within a second of each
// other) while a restarted one does not. With more faulty masters the
// lock may become unavailable (with three masters, one down and one whose
// clock stepped forward by more than a second in the first guard of its
// epoch: the two answers disagree and the healthy one may be the one that
// sits out), or, when a majority restarted, unprotected (below).
//
// What remains: masters that were never seen by anyone before cannot be
// told apart from restarted ones, so when every master that answers is
// young (a new deployment, or a majority restarted at once, which
// breaks the assumption above), none is discounted; a restart less than a
// second after the masters' first use is not caught, nor one less than
// s + 1 s after it if the restarted master's clock then steps forward by
// s (its age gains s; a step up to ClockBound is otherwise covered by the
// guard); persistence that loses recent writes without a restart
// (eviction with a volatile maxmemory policy) is not detected, so run the
// masters with maxmemory-policy noeviction. And, as with every lock, a
// holder paused past its lease (GC, SIGSTOP, a VM migration) may act on a
// lock it lost: pass its token to storage that rejects stale ones
// (package fence).
//
// # Clocks
//
// Which clock each promise depends on, with the defaults (N masters,
// quorum N/2+1, f = N − quorum):
//
//   - Exclusion: each key expires by its master's wall clock (SET PX);
//     the client counts the validity, TTL − elapsed − (TTL×1% + 2 ms), on
//     its own monotonic clock, and the core closes Done at 0.9×TTL of
//     it. A master whose clock runs up to 1% fast, or steps forward by
//     less than TTL×1% + 2 ms, is within the allowance. A larger forward
//     step of s on a master ends its keys up to s early, so that master
//     may grant the name to another client. A holder keeps the name
//     while its keys live on a quorum; one granted by exactly a quorum
//     (contenders often split the other votes) therefore loses
//     exclusion when one of those masters steps forward: another client
//     can win that master and the one the holder lacked, until the
//     holder's next refresh finds fewer than a quorum and gives the lock
//     up. So exclusion under a forward step beyond the drift allowance
//     holds only where the holder's keys live on more than a quorum, and
//     never when a majority steps at once (masters sharing one host
//     clock, or an NTP step on all of them): that is Redlock's own
//     assumption of bounded clock drift, which Options.ClockBound does
//     not lift. Tokens still rise (below), so fenced storage refuses the
//     earlier holder's writes; the fault suite checks exactly that under
//     clock-one-forward-5s and the all-master steps. Where a wall-clock
//     step must never cost exclusion, use redislock (its keys outlive a
//     step of up to its ClockBound) or a consensus store. The holder's
//     next refresh re-creates the key on a master that dropped it. A back step of s makes a master
//     keep keys up to s longer: after a holder's crash that master
//     refuses the name s longer, which delays no one while the others
//     make a quorum.
//   - Tokens: a master's candidate is one above its mark, and at least
//     its TIME in µs; the marks, not the clocks, make tokens increase, so
//     a step of any master's clock, either way, never lowers a token
//     while a majority keeps its marks (they last 30 days after a name's
//     last acquisition; only a restart without persistence, or a flush,
//     loses them earlier, and the restart guard above covers that for a
//     minority, with each restarted master's own clock). After 30 idle
//     days tokens still increase unless a master's clock is now more than
//     30 days behind the clock that made the last token.
//   - Availability and the restart rule: each master's epoch age is
//     measured by that master's own clock; a step of any size on at most
//     f masters, forward or back, does not keep the others from counting
//     (see Restarted masters). A master whose clock stepped back by s,
//     so that its age is more than a second below the reference, sits
//     out while its age is below the guard (the first 24h14m34s of its
//     epoch, plus s): that costs nothing while the other masters make a
//     quorum, and makes the lock unavailable (an error, not "held") when
//     they do not, as with one of three masters down. A master whose
//     clock stepped forward counts. A restarted master whose clock steps forward
//     by s after the restart sits out the guard minus s by real time, at
//     least MaxTTL + drift for s up to Options.ClockBound.
//
// # No shared locks or semaphores
//
// Redlock does not implement driver.MultiHolder: a shared hold or a
// permit would have to be counted per master and reconciled across
// masters whose sets of holders differ (a permit granted on one majority
// and another on a different one may together exceed the limit on no
// single master), and a writer's intent would need its own quorum. It
// would take a per-master holder set with a quorum rule per mode, and a
// proof like the one above for each; Acquire with dlock.Shared or
// dlock.WithLimit fails with dlock.ErrUnsupported.
//
// # Keys
//
// On each master, under Options.Prefix: "l:" + name, the lock (value
// "owner|token|metadata"); "f:" + name, the mark; "epoch"; and the
// channel "w:" + name. Names are used as they are (Redis keys are binary
// safe). Each client must reach one master (a *redis.Client), not a
// Cluster or a Ring.
//
// # Store URLs
//
// Importing the package registers this with dlock.Open:
//
//	redlock://[user:pass@]host:port,host:port,host:port[?prefix=...&clock_bound=10s]
//
// with at least three hosts (an odd number is best: a fourth master adds
// no tolerance to three). Every master takes the same user and password.
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
	"github.com/dlock-go/dlock/backend"
	"github.com/dlock-go/dlock/driver"
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
	// below a tenth of dlock.MinTTL (Drift < 10 ms − MinTTL×DriftFactor),
	// since the core gives up on a lock at 0.9×TTL.
	// Default: DefaultDriftFactor and DefaultDrift.
	DriftFactor float64
	Drift       time.Duration

	// MaxTTL is the longest TTL any client of these masters uses: a master
	// whose data is younger than MaxTTL plus drift plus ClockBound does
	// not count toward a quorum (see the package documentation), and Acquire with a longer
	// TTL fails with dlock.ErrInvalid. Lower it to shorten how long a
	// restarted master sits out. Default: dlock.MaxTTL.
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
	// Default: backend.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration
}

// New returns a Locker over independent Redis masters (no replication between them). A lock
// is held while a majority of them hold it.
//
// Each client must reach one master (a *redis.Client); there must be at
// least three, and an odd number is best. The Locker does not close them.
// A nil opts means defaults. Fewer than three clients, a nil one, one
// that is not a single node, or invalid Options get an error wrapping
// dlock.ErrInvalid.
func New(clients []redis.UniversalClient, opts *Options) (*dlock.Locker, error) {
	d, err := newDriver(clients, opts)
	if err != nil {
		return nil, err
	}
	return backend.New(d, &backend.Config{MaxRetryInterval: d.maxRetry}), nil
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
	masters     []redis.UniversalClient
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

func newDriver(clients []redis.UniversalClient, opts *Options) (*rlDriver, error) {
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
		if cl, ok := c.(*redis.Client); !ok || cl == nil {
			return nil, fmt.Errorf("redlock: new: master %d is %T, want a non-nil *redis.Client: %w", i, c, dlock.ErrInvalid)
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
		d.maxTTL = dlock.MaxTTL
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
	case o.Drift >= time.Duration(float64(dlock.MinTTL)*(0.1-o.DriftFactor)):
		// The core closes Done at 0.9×TTL: the allowance must stay below
		// a tenth of every TTL, dlock.MinTTL's included.
		return fmt.Errorf("a Drift of %v with DriftFactor %v is too large: the drift allowance must stay below a tenth of dlock.MinTTL (%v)", o.Drift, o.DriftFactor, dlock.MinTTL)
	case o.MaxTTL < 0 || o.MaxTTL > dlock.MaxTTL:
		return fmt.Errorf("MaxTTL %v outside [0, %v]", o.MaxTTL, dlock.MaxTTL)
	case o.MaxTTL > 0 && o.MaxTTL < dlock.MinTTL:
		return fmt.Errorf("MaxTTL %v below dlock.MinTTL %v", o.MaxTTL, dlock.MinTTL)
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
// and returns their outcomes in the masters' order once all are in or the
// timeout has passed, whichever comes first: go-redis does not always
// honour a context (the handshake of a new connection to a stopped
// server, for one), and one stuck master must not hold up the others'
// answers. A master that has not answered by then gets missing; a step
// that completes after that is passed to late, if not nil (to give back
// what it took), from the step's goroutine.
func each[T any](ctx context.Context, d *rlDriver, timeout time.Duration, missing T, step func(ctx context.Context, i int, c redis.UniversalClient) T, late func(i int, v T)) []T {
	out := make([]T, len(d.masters))
	for i := range out {
		out[i] = missing
	}
	var (
		mu       sync.Mutex
		returned bool
		pending  = len(d.masters)
		all      = make(chan struct{})
	)
	for i, c := range d.masters {
		d.steps.Add(1)
		go func() { // ends when step returns, bounded by go-redis's own timeouts; Close waits
			defer d.steps.Done()
			sctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v := step(sctx, i, c)
			mu.Lock()
			if returned {
				mu.Unlock()
				if late != nil {
					late(i, v)
				}
				return
			}
			out[i] = v
			if pending--; pending == 0 {
				close(all)
			}
			mu.Unlock()
		}()
	}
	t := time.NewTimer(timeout + eachGrace)
	defer t.Stop()
	select {
	case <-all:
	case <-t.C:
	}
	mu.Lock()
	defer mu.Unlock()
	returned = true
	return slices.Clone(out)
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

// Close closes the clients Open made, then waits for the steps that
// outlived their call (a stalled master's, bounded by go-redis's
// timeouts): Watch subscriptions end with their stop funcs.
// Backend names the store for hooks.
func (d *rlDriver) Backend() string { return "redlock" }

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
)
