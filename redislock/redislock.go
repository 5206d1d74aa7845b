// Package redislock is the dlock backend for Redis: a single node, a
// Sentinel-managed master, or a Redis Cluster, through the user's own
// go-redis client. Requires Redis 5 or later (scripts replicated by
// effects, for TIME).
//
// # Store URLs
//
// Importing the package registers these with dlock.Open:
//
//	redis://[user:pass@]host[:port][/db]
//	rediss://...                                  (TLS)
//	redis+sentinel://[user:pass@]host[:port][,host[:port]]/master-name
//	redis+cluster://[user:pass@]host[:port][,host[:port]]
//
// with the query parameters prefix (Options.Prefix), wait_replicas
// (Options.WaitReplicas, a number), wait_timeout (Options.WaitTimeout,
// a Go duration such as 200ms) and clock_bound (Options.ClockBound, a Go
// duration such as 10s), and the TLS parameters of
// backend.TLSParams: tls_ca, tls_cert and tls_key, tls_server_name,
// tls_insecure_skip_verify (only "true" skips verification). rediss://
// always speaks TLS, verifying the server against the system's
// authorities unless tls_ca names others; the other schemes speak TLS
// when any tls_ parameter is given, Sentinel and Cluster URLs to every
// sentinel, master and node, each checked against its own address unless
// tls_server_name is set. The user and password go to the master (or
// every node); Sentinels that demand a password of their own are not
// supported by URL (use New with a FailoverClient). A /db the server does
// not have (beyond its databases setting) fails Open with an error
// wrapping dlock.ErrBadURL. The clients Open
// makes are marked so that what go-redis's process-wide logger says about
// them is dropped (see redis.SetLogger: a program that sets its own
// logger decides for them too).
//
// # Guarantees
//
//   - Each step is one Lua script, owner-checked (and token-checked) on the
//     server; renewal of all of a Locker's locks is one pipeline.
//   - Waiters queue on the server, first come first served, in one queue
//     for every mode: a release hands the lock to the first live waiter in
//     the same script and wakes that one waiter (one pub/sub connection
//     per Locker). A handoff costs two script calls whatever the queue's
//     length, and a writer is never overtaken by readers that come after it.
//   - A Locker's exclusive waiters of one name wait in one line, which
//     keeps one entry in that queue (see AcquireQueued): when the name
//     comes to the Locker, the waiters of the line at that moment are
//     served in arrival order, each handed the name by the previous
//     holder's release in the same script (one script call per
//     acquisition, no message), and then the name goes on to the next
//     Locker in the queue. So Lockers take turns in queue order, and a
//     waiter may be served before another Locker's waiter that queued
//     before it, by at most one turn of its own Locker's line.
//   - Fencing tokens are max(server TIME in µs, previous token + 1); a
//     released name keeps its last token in a tombstone for the clock bound
//     plus one second (11 s by default), then nothing stays.
//   - Leases survive a step of the server's clock of up to
//     Options.ClockBound (driver.DefaultClockBound, 10 s), forward or back:
//     a key lives its TTL plus the bound, and a lease in doubt is taken over
//     only by a waiter that saw its holder's state unchanged for the
//     holder's TTL on its own monotonic clock.
//   - A holder that died is replaced about a TTL after its last renewal; a
//     waiter that died loses its place after three heartbeats.
//
// # Resume, Extend and lock-delay
//
// The Locker implements Locker.Resume (Lock.Token), Lock.Extend and
// dlock.WithLockDelay, in every mode, on a single node, Sentinel and
// Cluster alike:
//
//   - Resume is one script call (one round trip, plus WAIT when
//     WaitReplicas is set) that checks the old owner and token and renames
//     the hold in place: same token, same mode, the new owner's lease and
//     metadata. Waiters queued behind it stay queued and are handed the
//     name when the new owner releases it. A token names the key prefix and
//     database (Scope), never an address or a password.
//   - Extend is the refresh of one lease with the new TTL: one round trip.
//   - A hold WithLockDelay is written as a lease of TTL+delay: its key
//     lives TTL+delay plus the clock bound from each acquisition and
//     renewal, by the server's clock, and a waiter that observes the
//     holder's state (see Guarantees) observes it for TTL+delay, on its own
//     monotonic clock. A holder that crashed is therefore replaced no
//     sooner than TTL+delay after its last renewal; a Release frees the
//     name at once. The delay is stored in front of the holder's metadata
//     (nothing for a hold without one), for Inspect's Delayed.
//
// # Limits
//
//   - Redis replicates asynchronously: a server restarted without
//     persistence, or a failover that loses the latest writes, forgets held
//     locks, and another owner can take the name until the old holder's
//     next renewal (at most TTL/3 later) finds it gone. Fencing tokens keep
//     increasing across it (they come from the server's clock), so fenced
//     storage rejects the old holder's writes.
//   - Options.WaitReplicas (wait_replicas) narrows that window without
//     closing it: each acquisition and renewal waits for N replicas to
//     acknowledge (WAIT); with fewer, an acquisition fails with an error
//     wrapping ErrNotReplicated and a renewal's outcome is unknown, so N
//     live replicas are needed. WAIT is not consensus, and counts receipt
//     in memory, not on disk.
//   - The one condition that can make tokens go down: a server without
//     persistence (or with appendfsync everysec) restarted after its clock
//     stepped back, or a failover to a replica that lost the latest writes
//     and whose clock is behind. Run with appendonly yes and appendfsync
//     always to close it.
//   - A crashed shared holder or permit holder keeps its place for up to
//     its TTL plus the clock bound.
//   - Locker.Observe reads the store every Options.MaxRetryInterval (and
//     after the same Locker's own releases): the scripts publish only
//     grants, so nothing tells it of other clients' changes between reads,
//     and a hold shorter than the interval may not be reported.
//
// # Access control
//
// A store that refuses the client's credentials (NOAUTH, WRONGPASS, a
// TLS client certificate it rejects) or a command, key or channel its
// ACL user is not granted (NOPERM) makes the step fail with an error
// wrapping dlock.ErrDenied, the server's message included. Open checks
// the credentials (PING) and that the user may subscribe to its grant
// channel before it returns. The least a Locker's ACL user needs, for
// the default prefix "d" (Redis checks the commands scripts run
// against the caller's ACL too, so they are listed):
//
//	ACL SETUSER locker on >password resetkeys ~d{* resetchannels &dw:* nocommands
//	    +ping +select +subscribe +evalsha +eval +scan +time +type +exists +get +set +del +pttl +pexpire
//	    +hget +hset +hdel +hgetall +lindex +lrange +lpush +rpush +lpop +lset +lrem +publish
//
// SELECT serves a database other than 0 (redis://host/3), which the
// client selects on each connection. SCAN serves only Inspect of every
// name (dlock status without names) and is not limited by the key
// pattern: leave it out if nothing lists all locks. With another prefix, change the key pattern (prefix + "{*") and the channel
// pattern (prefix + "w:*"). Anyone with that grant can delete another
// Locker's lock with raw commands; the holder's Done then closes at its
// next renewal, and the next owner's fencing token is higher.
//
// # Upgrading
//
// The default prefix is "d" since this version: a name's key is
// "d{" + name + "}" (see Key), where earlier versions wrote
// "dlock:{" + name + "}". The shorter key keeps a held lock within
// Redis's 16-byte allocation for names of up to 11 bytes, so it costs
// redis-server about 147 B, as a redsync or bsm/redislock lock does (164
// B with "dlock:"; DESIGN.md, "Memory"). Lockers with different prefixes
// do not see each other's locks, so an earlier version's Locker and one
// of this version with the default prefix can hold the same name at once.
// To upgrade, do one of:
//
//   - Stop every Locker of the earlier version before the first one of
//     this version starts. Nothing needs migrating: the old keys expire
//     with their leases, and tokens still increase, since a name's first
//     token under the new key is the server's time in µs, above any token
//     the same server wrote before unless its clock was set back.
//   - Or keep the earlier keys: give this version's Lockers Prefix
//     "dlock:" (or ?prefix=dlock: in the store URL), and move to the new
//     default later, with every Locker of the store stopped, or never.
//
// With prefix "dlock:", Lockers of both versions meet on one key per name
// and exclude each other. This version writes a held lock's value packed
// (the fence, lease and renewal counter in binary after the owner: 28
// bytes, against 43 before), and reads both that and the decimal value
// of earlier versions:
//
//   - A lock held by an earlier version is held for this one: it is not
//     taken, its fence is read exactly (the next token is above it), and
//     a waiter of this version queues behind it and takes it over if its
//     holder dies, as before.
//   - A lock held by this version is foreign to an earlier one: its
//     Acquire and TryAcquire of that name fail with an error ("key holds
//     a value dlock did not write") instead of waiting, and take nothing;
//     once the name is released (tombstones keep the decimal form) or its
//     lease runs out, they take it again, with a higher token.
//   - A waiter of an earlier version that a Locker of this version hands
//     the name to from the queue holds it in the packed form, which its
//     own scripts cannot renew: it loses the lock at its first renewal
//     (its Done closes; nobody else holds the name until its lease ends).
//
// So mutual exclusion and increasing tokens hold throughout; what such
// an upgrade costs is errors and lost locks on the earlier version's side
// for names both versions use.
//
// # Example
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	locker, err := redislock.New(client, nil) // the Locker does not close client
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "stock/sku-42", dlock.WithTTL(10*time.Second))
//
// # Other clients
//
// Modules of their own run the same Locker on other clients, without
// adding them to a go-redis user's graph: rueidisredis.NewLocker on a
// rueidis client and valkeyredis.NewLocker on a valkey-go client (and the
// URLs redis+rueidis:// and redis+valkey://). Lockers on any of the
// clients share keys and names.
//
// Fence keeps values in Redis that a stale lock holder cannot overwrite
// (see package fence).
//
// Design: the queue and its grants, shared holds and semaphores, the keys,
// fencing tokens, clock steps, behaviour under faults and replica
// acknowledgement are described in DESIGN.md in this package's directory
// (redislock/DESIGN.md).
package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/goredis/goredisconn"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// DefaultPrefix is Options.Prefix's default: "d", so that a name's key
// is "d{" + name + "}". Earlier versions' default was "dlock:" (see
// "Upgrading" in the package documentation).
const DefaultPrefix = "d"

// tombstoneExtra is how much longer than the clock bound a released
// lock's key keeps its last fencing token (see "Fencing tokens" in the
// package documentation).
const tombstoneExtra = time.Second

// Options configures a Redis Locker. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every key and channel dlock uses. It must
	// not contain '{' or '}', which would change the keys' Cluster hash
	// tag. A held lock's key is Prefix + "{" + name + "}" (see Key): with
	// the default one-byte prefix and a name of up to 11 bytes, the key
	// fits Redis's 16-byte allocation (DESIGN.md, "Memory"), and a key of
	// 15 to 30 bytes takes the 32-byte one. Lockers with different prefixes
	// do not see each other's locks: change it only with every Locker of
	// the store stopped. Earlier versions' default was "dlock:" (see
	// "Upgrading" in the package documentation). Default: DefaultPrefix.
	Prefix string

	// MaxRetryInterval bounds how long a waiter waits for a wake-up
	// before trying again (a waiter never waits longer than the holder's
	// remaining lease either). It must not be negative.
	// Default: driver.DefaultMaxRetryInterval.
	MaxRetryInterval time.Duration

	// WaitReplicas, when above 0, makes every step that writes a lease
	// (an acquisition, a queued grant's confirmation, a renewal) wait
	// until that many replicas acknowledge the write (WAIT), for at most
	// WaitTimeout; see "Replica acknowledgement" in the package
	// documentation. It needs a *redis.Client (plain or Sentinel) or a
	// *redis.ClusterClient, and must not be negative. Default: 0 (no
	// waiting). On a Cluster the steps then run on the key's master node
	// client (so that the WAIT follows the script on its connection):
	// hooks added to the ClusterClient do not see them (add them to its
	// node clients with OnNewNode), and a MOVED or ASK reply during a
	// resharding fails the step instead of being followed.
	WaitReplicas int

	// WaitTimeout bounds each WAIT. Keep it well below the client's
	// ReadTimeout (3 s by default), which a pipeline's WAIT does not
	// extend. It must not be negative. Default: a tenth of the lease's
	// TTL, at most one second (at least a millisecond).
	WaitTimeout time.Duration

	// ClockBound is the largest step of the Redis server's wall clock,
	// forward or back, that neither ends a lease under its holder nor
	// makes a fencing token go down (see "Clock steps" in the package
	// documentation). A lock's key lives its TTL plus ClockBound on the
	// server; a released name's token is kept for ClockBound plus one
	// second. Every Locker sharing names should use the same bound. It
	// must not be negative; 0 means the default. Default:
	// driver.DefaultClockBound.
	ClockBound time.Duration
}

// New returns a Locker on the Redis server behind client: a *redis.Client,
// a *redis.ClusterClient, or a Sentinel failover client. The Locker does
// not close client. A nil opts means defaults. A nil client or invalid
// Options get an error wrapping dlock.ErrInvalid.
//
// Give client ContextTimeoutEnabled (a field of go-redis's options): without
// it go-redis ignores context deadlines, so a renewal sent to a server that
// stopped answering returns only after the client's ReadTimeout (3 s by
// default), and no other renewal batch of the Locker starts meanwhile. A
// lock is still given up on time (Done closes by its own deadline), but
// hooks hear of the failed renewal late, and a TTL shorter than about
// 3 × ReadTimeout may lose locks that a faster retry would have kept.
// Clients made by dlock.Open set it.
func New(client redis.UniversalClient, opts *Options) (*dlock.Locker, error) {
	l, _, err := newLocker(client, opts, false)
	return l, err
}

// newLocker is New, also returning the driver under the Locker (for the
// test hook); with ownClient set (Open made client) the Locker's Close
// closes client.
func newLocker(client redis.UniversalClient, opts *Options, ownClient bool) (*dlock.Locker, driver.Driver, error) {
	if isNil(client) {
		return nil, nil, fmt.Errorf("redislock: new: nil client: %w", dlock.ErrInvalid)
	}
	if opts != nil && opts.WaitReplicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return nil, nil, fmt.Errorf("redislock: new: %w: WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not a %T", dlock.ErrInvalid, client)
		}
	}
	return newConnLocker(goredisconn.New(client), opts, ownClient)
}

// newConnLocker is newLocker on any client (see package redisconn); the
// adapters of other clients reach it through redisconn.NewRedislock.
func newConnLocker(client redisconn.Conn, opts *Options, ownClient bool) (*dlock.Locker, driver.Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.check(); err != nil {
		return nil, nil, fmt.Errorf("redislock: new: %w: %w", dlock.ErrInvalid, err)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.ClockBound == 0 {
		o.ClockBound = driver.DefaultClockBound
	}
	d := &redisDriver{c: client, prefix: o.Prefix, bound: o.ClockBound, ownClient: ownClient}
	if o.WaitReplicas > 0 {
		if _, ok := client.(redisconn.KeyRouter); !ok && redisconn.IsCluster(client) {
			return nil, nil, fmt.Errorf("redislock: new: %w: WaitReplicas on a Cluster needs a client that routes to a key's master", dlock.ErrInvalid)
		}
		d.wait = &replicaWait{replicas: o.WaitReplicas, timeout: o.WaitTimeout}
	}
	d.grants = newGrants(client, d.channelPrefix(), ownClient)
	d.batch = newBatcher(client, d.wait)
	return dlock.NewLocker(d, driver.LockerOptions{MaxRetryInterval: o.MaxRetryInterval}), d, nil
}

// check reports what is wrong with o, if anything.
func (o Options) check() error {
	if strings.ContainsAny(o.Prefix, "{}") {
		return fmt.Errorf("prefix %q contains a brace, which would change the keys' hash tag", o.Prefix)
	}
	if o.MaxRetryInterval < 0 {
		return fmt.Errorf("negative MaxRetryInterval %v", o.MaxRetryInterval)
	}
	if o.WaitReplicas < 0 {
		return fmt.Errorf("negative WaitReplicas %d", o.WaitReplicas)
	}
	if o.WaitTimeout < 0 {
		return fmt.Errorf("negative WaitTimeout %v", o.WaitTimeout)
	}
	if o.ClockBound < 0 {
		return fmt.Errorf("negative ClockBound %v", o.ClockBound)
	}
	return nil
}

// isNil reports whether client is nil, or a nil pointer of one of
// go-redis's client types.
func isNil(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// Key returns the Redis key that holds the lock on name under prefix (""
// means DefaultPrefix), for inspection and administrative deletion.
func Key(prefix, name string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return prefix + "{" + escaper.Replace(name) + "}"
}

var escaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

type redisDriver struct {
	c         redisconn.Conn
	prefix    string
	bound     time.Duration // Options.ClockBound
	grants    *grants
	lines     lines // exclusive waiters by name (see lines)
	batch     *batcher
	wait      *replicaWait   // nil: no WAIT after writes
	ownClient bool           // made by Open: Close closes it
	leaving   sync.WaitGroup // leave's releases still under way; Close waits
}

// Classify implements driver.Classifier with the client's classification:
// the core maps refusals to dlock.ErrDenied, dlock.ErrNoSpace.
func (d *redisDriver) Classify(err error) driver.ErrorKind { return d.c.Classify(err) }

// The optional capabilities redisDriver provides; the core probes them
// with type assertions, so a signature drift must not compile.
var (
	_ driver.Queuer        = (*redisDriver)(nil)
	_ driver.Inspector     = (*redisDriver)(nil)
	_ driver.ForceReleaser = (*redisDriver)(nil)
	_ driver.MultiHolder   = (*redisDriver)(nil)
	_ driver.WaiterCounter = (*redisDriver)(nil)
	_ driver.Classifier    = (*redisDriver)(nil)
)

// keys returns the lock key and its queue's key (see lua/common.lua).
func (d *redisDriver) keys(name string) []string {
	k := Key(d.prefix, name)
	return []string{k, k + ":q"}
}

func (d *redisDriver) channelPrefix() string { return d.prefix + "w:" }

func ms(d time.Duration) int64 { return d.Milliseconds() }

// tombstone is how long a released name's key keeps its last token: past
// the clock bound, so that a step back of the server's clock by up to the
// bound, once the tombstone is gone, cannot bring TIME below that token.
func (d *redisDriver) tombstone() time.Duration { return d.bound + tombstoneExtra }

// heartbeat is how often a waiter refreshes its place in the queue: at
// most half the granted lease (see grantLease), so that a waiter whose
// grant message was lost still confirms the grant before it lapses; its
// place lapses after three heartbeats without one.
func heartbeat(ttl time.Duration) time.Duration { return min(ttl/3, maxHeartbeat) }

// maxHeartbeat bounds how long a waiter goes without refreshing its place
// in the queue.
const maxHeartbeat = time.Second

// queueTTL is how long a queue outlives the last write to it: twice the
// longest a place is kept without a refresh (three heartbeats).
const queueTTL = 6 * maxHeartbeat

// grantLease bounds the lease of a lock handed to a waiter by a release
// (or by an acquire script that found the lock free and a waiter first in
// line) until the waiter confirms it with its own owner-checked script
// call, which extends it to the waiter's TTL. A waiter that died while
// queued therefore holds the name up for at most this long, whatever its
// TTL.
const grantLease = 2 * time.Second

// freshGrant is how recently a waiter must have written its queue entry
// for a release to hand it the lock with its full TTL, which it takes
// without confirming (see AcquireQueued). A waiter that died less than
// this before the lock was handed to it holds the name up for its TTL,
// as a holder that died just after taking it would; one dead for longer
// gets grantLease.
const freshGrant = 500 * time.Millisecond

func (d *redisDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	return d.acquire(ctx, l, noQueue, 0)
}

// How an acquire call treats the queue.
const (
	noQueue   = "0" // a single attempt
	joinQueue = "1" // join the queue if not acquired
	keepPlace = "2" // refresh the place an earlier call of this wait took
)

// acquire runs the acquire script once; with queue joinQueue or
// keepPlace, the owner joins (or stays in) the queue if it does not get
// the lock, with ticket (see AcquireQueued) in its entry. If it joined
// the queue in this call, the Result has Waited set and Ahead the entries
// ahead of it then (holders included).
func (d *redisDriver) acquire(ctx context.Context, l driver.Lease, queue string, ticket int) (driver.Result, error) {
	keep := 3 * heartbeat(l.TTL)
	call := d.batch.run(&scriptCall{ctx: ctx, script: acquireScript, keys: d.keys(l.Name), wait: true, ttl: l.TTL,
		args: []any{l.Owner, ms(l.TTL + l.Delay), storedMeta(l), queue, ms(keep), d.channelPrefix(), modeArg(l), ticket, l.Takeover, ms(d.bound)}})
	vals, err := call.reply.Slice()
	if err != nil {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
	}
	if len(vals) != 2 && len(vals) != 3 && len(vals) != 5 {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: unexpected reply %v", l.Name, vals)
	}
	switch ok, _ := vals[0].(int64); ok {
	case 0:
		pttl, _ := vals[1].(int64)
		res := driver.Result{Remaining: time.Duration(max(pttl, 0)) * time.Millisecond}
		if len(vals) >= 3 {
			if ahead, _ := vals[2].(int64); ahead >= 0 {
				res.Waited, res.Ahead = true, int(ahead)
			}
		}
		if len(vals) == 5 {
			res.Stamp, _ = vals[3].(string)
			stampTTL, _ := vals[4].(int64)
			res.StampTTL = time.Duration(stampTTL) * time.Millisecond
		}
		return res, nil
	case -1:
		held, _ := vals[1].(string)
		return driver.Result{}, fmt.Errorf("redislock: acquire %q as %s: held as %s: %w", l.Name, modeName(modeArg(l)), modeName(held), driver.ErrMode)
	}
	s, _ := vals[1].(string)
	fence, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: bad fencing token %q", l.Name, s)
	}
	if d.wait != nil {
		// Taken on the master but perhaps not on the replicas: the core
		// releases what a failed acquisition took.
		if err := d.wait.check(call.acks); err != nil {
			return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
		}
	}
	return driver.Result{Acquired: true, Fence: fence}, nil
}

// AcquireQueued waits in the lock's first-come-first-served queue on the
// server. A releasing owner hands the lock to the first live waiter in the
// same script and tells its Locker over pub/sub.
//
// Each call of the acquire script in one wait carries a ticket, its
// number, which it writes into the waiter's queue entry. A grant message
// names the ticket of the entry it was granted from (and, by then, the
// lease is the waiter's full TTL), so the grant happened after the call
// with that ticket was sent: the waiter takes the message as the grant,
// its lease measured from that call, with no further round trip. A
// message is otherwise only a hint (ticket 0: the grant lease is short,
// the entry was older than freshGrant; or WaitReplicas is set, and the
// grant must be acknowledged by replicas), so the waiter runs the acquire script once
// more, which checks on the server that it is the owner and extends the
// lease to its TTL. The waiter also repeats the script every heartbeat,
// which keeps its place and catches a grant whose message was lost and a
// holder that died without releasing.
//
// An exclusive waiter waits in its Locker's line for the name (see
// lines): the line's active waiter (its newest) waits in the server's
// queue as above, the others in the Locker, and a holder of the Locker
// hands the name to the waiters of its cohort in its release.
func (d *redisDriver) AcquireQueued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	if !d.lineable(l) {
		return d.queued(ctx, l)
	}
	w := d.lines.join(l)
	for {
		res, state, err := d.lines.waitPassive(ctx, w)
		if state != unknown {
			if state != active {
				return res, err
			}
			break
		}
		// The release that was handing it the name got no reply: ask the
		// server (an owner that holds the name re-enters it). An error
		// leaves the core to free what the owner may hold.
		sent := time.Now()
		res, err = d.acquire(ctx, l, noQueue, 0)
		d.lines.settle(w, err != nil || res.Acquired)
		if err != nil || res.Acquired {
			res.LeaseStart, res.Waited, res.Ahead = sent, true, w.ahead
			return res, err
		}
	}
	if err := ctx.Err(); err != nil {
		d.lines.activeDone(w, false)
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
	}
	res, err := d.queued(ctx, l)
	d.lines.activeDone(w, err == nil && res.Acquired)
	return res, err
}

// queued is AcquireQueued in the server's queue.
func (d *redisDriver) queued(ctx context.Context, l driver.Lease) (driver.Result, error) {
	lockerID, _, _ := strings.Cut(l.Owner, ":")
	wake, ready, stop, err := d.grants.wait(lockerID, l.Owner)
	if err != nil {
		return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
	}
	defer stop()
	select {
	case <-ready:
		ready = nil // subscribed long ago: nothing to catch up on
	default:
	}
	hb := heartbeat(l.TTL)
	waited, ahead := false, -1 // for Result.Waited and Ahead
	var sent []time.Time       // by ticket - 1: when each call was sent
	var obs driver.Observer    // the holder's stamp, for a takeover
	queue := joinQueue
	for {
		ticket := 0
		if d.wait == nil {
			ticket = len(sent) + 1
		}
		sent = append(sent, time.Now())
		res, err := d.acquire(ctx, l, queue, ticket)
		if err != nil {
			return res, err // the core frees what a lost reply may have taken
		}
		queue = keepPlace
		if res.Acquired {
			// This call checked the owner on the server and set the
			// lease to TTL after it was sent.
			res.LeaseStart = sent[len(sent)-1]
			if waited {
				res.Waited, res.Ahead = true, ahead
			}
			return res, nil
		}
		if res.Waited {
			ahead = res.Ahead // joined the queue (again, if its place lapsed)
		}
		waited = true
		wait := hb
		if res.Remaining > 0 {
			wait = min(wait, res.Remaining+time.Millisecond)
		}
		// The holder's stamp, unchanged for its TTL on this process's
		// clock, means it has given the lease up (see driver.Result.Stamp):
		// the next call takes the name over if the stamp still stands.
		takeover, left := obs.Note(res, time.Now())
		l.Takeover = takeover
		switch {
		case takeover != "":
			continue
		case left > 0:
			wait = min(wait, left+time.Millisecond)
		}
		if ready != nil {
			// Queued before the Locker's subscription was confirmed: a
			// grant may go unheard, so ask again once it is (or soon).
			wait = min(wait, subscribeWait)
		}
		t := time.NewTimer(wait)
		select {
		case msg := <-wake: // a grant, a resubscription or a refusal
			if fence, at, ok := granted(msg, sent); ok && time.Since(at) < l.TTL/2 {
				// The call with the message's ticket was sent recently
				// enough that the grant cannot have lapsed; an older one
				// may name a grant that lapsed unused (the name passed on
				// since, and perhaps back to this owner with a newer
				// token): the next call asks the server.
				t.Stop()
				return driver.Result{Acquired: true, Fence: fence, LeaseStart: at, Waited: true, Ahead: ahead}, nil
			}
			if err := d.grants.failure(); err != nil {
				t.Stop()
				d.leave(l)
				return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, err)
			}
		case <-ready:
			ready = nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			d.leave(l)
			return driver.Result{}, fmt.Errorf("redislock: acquire %q: %w", l.Name, ctx.Err())
		}
		t.Stop()
	}
}

// granted reads a grant message "owner|fence|ticket": if the ticket is
// that of one of the calls sent (sent[ticket-1] the time it was sent), the
// lease was granted for the waiter's TTL after that time. It reports the
// fence and that time.
func granted(msg string, sent []time.Time) (fence uint64, at time.Time, ok bool) {
	parts := strings.Split(msg, "|")
	if len(parts) != 3 {
		return 0, time.Time{}, false
	}
	ticket, err := strconv.Atoi(parts[2])
	if err != nil || ticket < 1 || ticket > len(sent) {
		return 0, time.Time{}, false
	}
	fence, err = strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0, time.Time{}, false
	}
	return fence, sent[ticket-1], true
}

// subscribeWait bounds how long a waiter queued before its Locker's
// subscription was confirmed goes without asking again.
const subscribeWait = 100 * time.Millisecond

// leave takes an abandoned waiter out of the queue, and frees the lock if
// it was granted meanwhile. It waits at most leaveWait, so that a
// cancelled AcquireQueued returns well within the core's grace for it
// (one second) even when the server does not answer; the release goes on
// in a goroutine that exits when the client gives up on it (go-redis
// ignores context deadlines unless the client opts in), and Close waits
// for it.
func (d *redisDriver) leave(l driver.Lease) {
	done := make(chan struct{})
	d.leaving.Add(1)
	go func() {
		defer d.leaving.Done()
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		defer cancel()
		d.release(ctx, l, false) // a waiter: nothing to hand to its line
	}()
	t := time.NewTimer(leaveWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

const (
	leaveWait    = 500 * time.Millisecond
	leaveTimeout = 5 * time.Second
)

func (d *redisDriver) Refresh(ctx context.Context, ls []driver.Lease) []error {
	errs := make([]error, len(ls))
	calls := make([]*scriptCall, len(ls))
	for i, l := range ls {
		calls[i] = &scriptCall{ctx: ctx, script: refreshScript, keys: []string{Key(d.prefix, l.Name)}, args: []any{l.Owner, ms(l.TTL + l.Delay), strconv.FormatUint(l.Fence, 10), ms(d.bound)}, wait: true, ttl: l.TTL}
	}
	runScripts(ctx, d.c, d.wait, calls)
	for i, c := range calls {
		n, err := c.reply.Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redislock: refresh %q: %w", ls[i].Name, err)
		case n == 0:
			errs[i] = fmt.Errorf("redislock: refresh %q: %w", ls[i].Name, driver.ErrNotHeld)
		case d.wait != nil:
			// Extended on the master; whether a failover would keep it
			// is unknown: the core's deadline stays where it was.
			if err := d.wait.check(c.acks); err != nil {
				errs[i] = fmt.Errorf("redislock: refresh %q: outcome unknown: %w", ls[i].Name, err)
			}
		}
	}
	return errs
}

func (d *redisDriver) Release(ctx context.Context, l driver.Lease) error {
	return d.release(ctx, l, true)
}

// release is Release; with hand set, an exclusive holder hands the name
// to the next waiter of its Locker's cohort, if one waits (see lines).
func (d *redisDriver) release(ctx context.Context, l driver.Lease, hand bool) error {
	// No WAIT: a release a failover loses keeps the name busy until its
	// lease ends, no more.
	args := []any{l.Owner, ms(d.tombstone()), d.channelPrefix(), ms(d.bound)}
	var next *lineWaiter // a waiter of this Locker's cohort, handed the name in place
	if hand && d.lineable(l) {
		if next = d.lines.pick(l.Name); next != nil {
			// The successor goes before the clock bound, the last argument.
			args = slices.Insert(args, 3, []any{next.lease.Owner, ms(next.lease.TTL), storedMeta(next.lease)}...)
		}
	}
	sent := time.Now()
	reply := d.batch.run(&scriptCall{ctx: ctx, script: releaseScript, keys: d.keys(l.Name), args: args}).reply
	vals, held := reply.Val.([]any)
	if next != nil {
		// {2, fence}: handed to next. Any other outcome, and next asks
		// the server whether it holds the name: not only when there is
		// no reply, since the reply may be a retry's (go-redis sends a
		// command again on a new connection when one breaks, and the
		// second run of a release that handed the name on finds the
		// releaser holding nothing).
		outcome, fence := unknown, uint64(0)
		if reply.Err == nil && len(vals) == 2 && vals[0] == int64(2) {
			if f, ok := vals[1].(int64); ok && f > 0 {
				outcome, fence = handedOn, uint64(f)
			}
		}
		d.lines.handed(next, outcome, fence, sent)
		if outcome == handedOn {
			return nil
		}
	}
	if reply.Err != nil {
		return fmt.Errorf("redislock: release %q: %w", l.Name, reply.Err)
	}
	if !held {
		return fmt.Errorf("redislock: release %q: %w", l.Name, driver.ErrNotHeld)
	}
	// Handed to waiters: those of this Locker are told now rather than
	// after the pub/sub message's trip.
	for i := 1; i+2 < len(vals); i += 3 {
		if next, _ := vals[i].(string); sameLocker(next, l.Owner) {
			fence, _ := vals[i+1].(string)
			ticket, _ := vals[i+2].(string)
			d.grants.wake(next, next+"|"+fence+"|"+ticket)
		}
	}
	return nil
}

// modeArg is how the scripts name l's mode: "x" exclusive, "s" shared,
// or a semaphore's limit.
func modeArg(l driver.Lease) string {
	switch {
	case l.Limit > 0:
		return strconv.Itoa(l.Limit)
	case l.Shared:
		return "s"
	}
	return "x"
}

// modeName describes a mode as the scripts name it, for errors.
func modeName(mode string) string {
	switch mode {
	case "x":
		return "an exclusive lock"
	case "s":
		return "a shared lock"
	}
	return "a semaphore of " + mode
}

// MultiHolder implements driver.MultiHolder: shared holds and semaphores.
func (d *redisDriver) MultiHolder() bool { return true }

// sameLocker reports whether two owner strings belong to one Locker.
func sameLocker(a, b string) bool {
	i, j := strings.IndexByte(a, ':'), strings.IndexByte(b, ':')
	return i > 0 && i == j && a[:i] == b[:j]
}

// Backend names the store for hooks.
func (d *redisDriver) Backend() string { return "redis" }

func (d *redisDriver) Close() error {
	err := d.grants.close()
	d.leaving.Wait()
	if d.ownClient {
		err = errors.Join(err, d.c.Close())
	}
	return err
}
