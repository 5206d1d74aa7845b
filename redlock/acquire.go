package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redisconn"
)

// vote is one master's answer to the acquire script.
type vote struct {
	err       error
	granted   bool
	candidate uint64        // when granted: the token this master proposes
	remaining time.Duration // when not granted: the other holder's lease here
	age       time.Duration // of the master's epoch
	counts    bool          // the master counts toward a quorum (set by tally)
}

// Acquire takes l.Name on a majority of the masters, writes its token back
// to a majority, and reports it held only while its validity lasts. See
// the package documentation.
func (d *rlDriver) Acquire(ctx context.Context, l driver.Lease) (driver.Result, error) {
	if l.TTL > d.maxTTL {
		return driver.Result{}, fmt.Errorf("redlock: acquire %q: TTL %v above Options.MaxTTL %v: %w", l.Name, l.TTL, d.maxTTL, dlock.ErrInvalid)
	}
	timeout := d.timeoutFor(l.TTL)
	owner := l.Owner
	l = d.attemptOwner(l)
	sent := time.Now()
	votes := each(ctx, d, timeout, vote{err: errNoAnswer}, func(ctx context.Context, _ int, c redisconn.Conn) vote {
		return d.vote(ctx, c, l)
	}, func(i int, v vote) {
		if v.granted { // too late to count: give it back on that master
			d.releaseOn(d.masters[i], l, "c")
		}
	}, nil) // every answer, not the first quorum: tally's reference age needs them all
	answered, counting, granted := d.tally(votes)
	if granted < d.quorum {
		d.giveBack(ctx, l, "c", nil)
		if err := ctx.Err(); err != nil {
			return driver.Result{}, fmt.Errorf("redlock: acquire %q: %w", l.Name, err)
		}
		if answered < d.quorum {
			return driver.Result{}, fmt.Errorf("redlock: acquire %q: %d of %d masters answered, want %d: %w", l.Name, answered, len(votes), d.quorum, firstErr(votes))
		}
		if counting < d.quorum {
			// Not a contention: with fewer than a quorum of counting
			// masters no one can take the name, free or not.
			return driver.Result{}, fmt.Errorf("redlock: acquire %q: %d of %d masters answered but only %d count toward a quorum of %d: by its own clock, the data of each of the other %d is younger than the restart guard (%v, Options.MaxTTL + drift + ClockBound) and more than %v younger than the others' (a restart or flush, or clocks that stepped); it counts once older than the guard", l.Name, answered, len(votes), counting, d.quorum, answered-counting, d.guard(), epochSlack)
		}
		// A counting master refused: another owner holds a key there
		// (possibly contenders that split the votes).
		return driver.Result{Remaining: d.remaining(votes, l.TTL)}, nil
	}
	var token uint64
	for _, v := range votes {
		if v.granted {
			token = max(token, v.candidate)
		}
	}
	confirmed := each(ctx, d, timeout, errNoAnswer, func(ctx context.Context, i int, c redisconn.Conn) error {
		if !votes[i].granted {
			return nil
		}
		n, err := fenceScript.Exec(ctx, c, d.keys(l.Name)[:2], l.Owner, token, storedMeta(l), markSeconds()).Int64()
		if err == nil && n != 1 {
			err = driver.ErrNotHeld
		}
		return err
	}, nil, func(i int, err error) bool { return votes[i].granted && votes[i].counts && err == nil })
	written := 0
	for i, err := range confirmed {
		if votes[i].granted && votes[i].counts && err == nil {
			written++
		}
	}
	if d.pause != nil {
		d.pause()
	}
	validity := l.TTL - time.Since(sent) - d.driftFor(l.TTL)
	if written < d.quorum || validity <= 0 {
		d.giveBack(ctx, l, "c", nil)
		if err := ctx.Err(); err != nil {
			return driver.Result{}, fmt.Errorf("redlock: acquire %q: %w", l.Name, err)
		}
		return driver.Result{Remaining: retryDelay(l.TTL)}, nil
	}
	d.remember(owner, held{token: token, key: l.Owner})
	return driver.Result{Acquired: true, Fence: token, LeaseStart: sent}, nil
}

// vote runs the acquire script on one master.
func (d *rlDriver) vote(ctx context.Context, c redisconn.Conn, l driver.Lease) vote {
	r, err := acquireScript.Exec(ctx, c, d.keys(l.Name), l.Owner, ms(l.TTL+l.Delay), storedMeta(l)).Slice()
	if err != nil {
		return vote{err: err}
	}
	if len(r) != 3 {
		return vote{err: fmt.Errorf("acquire script returned %d values", len(r))}
	}
	age, _ := r[2].(int64)
	v := vote{age: time.Duration(age) * time.Millisecond}
	switch r[0] {
	case int64(1):
		s, _ := r[1].(string)
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return vote{err: fmt.Errorf("acquire script returned token %q", s)}
		}
		v.granted, v.candidate = true, n
	default:
		p, _ := r[1].(int64)
		v.remaining = time.Duration(max(p, 0)) * time.Millisecond
	}
	return v
}

// tally marks which answering masters count toward a quorum and returns
// how many masters answered, how many of them count, and how many
// counting ones granted. A master counts unless its data is younger than
// the restart guard and more than epochSlack younger than the reference
// age: the quorum-th youngest epoch age among the A answers, that is the
// (A − quorum + 1)-th oldest. Each age is measured by its master's own
// clock. If at most f = N − quorum masters are faulty (stepped clocks,
// either way; restarted; not answering), at most A − quorum of the
// answers are, so at most A − quorum ages lie above the healthy masters'
// and at most A − quorum below them, and the reference is a healthy
// master's age: a minority cannot make the healthy masters look
// restarted, nor a restarted master look old (see the package
// documentation).
func (d *rlDriver) tally(votes []vote) (answered, counting, granted int) {
	ages := make([]time.Duration, 0, len(votes))
	for _, v := range votes {
		if v.err == nil {
			ages = append(ages, v.age)
		}
	}
	slices.Sort(ages) // youngest first
	var ref time.Duration
	if len(ages) > 0 {
		ref = ages[min(d.quorum, len(ages))-1] // below a quorum, Acquire fails anyway
	}
	for i := range votes {
		v := &votes[i]
		if v.err != nil {
			continue
		}
		answered++
		v.counts = v.age >= d.guard() || v.age >= ref-epochSlack
		if v.counts {
			counting++
			if v.granted {
				granted++
			}
		}
	}
	return answered, counting, granted
}

// remaining returns how long until a majority of the masters may be free:
// the quorum-th shortest of the other holders' leases (0 where a master
// granted), or, when no one holds a majority, a random retry delay.
func (d *rlDriver) remaining(votes []vote, ttl time.Duration) time.Duration {
	var rs []time.Duration
	for _, v := range votes {
		if v.err == nil {
			rs = append(rs, v.remaining)
		}
	}
	slices.Sort(rs)
	if len(rs) < d.quorum || rs[d.quorum-1] == 0 {
		return retryDelay(ttl)
	}
	return rs[d.quorum-1]
}

// giveBack releases l on every master, answered or not, with message
// ("r" for a release, "c" for a failed attempt's give-back) for waiters.
// It runs even if ctx has ended, bounded by the per-master timeout, and
// returns once every master answered, or a quorum of answers satisfy
// settled (if not nil; see each): the other masters' steps go on.
func (d *rlDriver) giveBack(ctx context.Context, l driver.Lease, message string, settled func(int, error) bool) []error {
	ctx = context.WithoutCancel(ctx)
	return each(ctx, d, d.timeoutFor(l.TTL), errNoAnswer, func(ctx context.Context, _ int, c redisconn.Conn) error {
		return d.release(ctx, c, l, message)
	}, nil, settled)
}

// giveBackAny releases, on every master, a key left by any attempt of l's
// acquisition (whatever its attempt number), for a Release after an
// Acquire that failed or whose reply was lost. It returns once a quorum
// freed it (or every master answered): the others' steps go on.
func (d *rlDriver) giveBackAny(ctx context.Context, l driver.Lease) []error {
	ctx = context.WithoutCancel(ctx)
	return each(ctx, d, d.timeoutFor(l.TTL), errNoAnswer, func(ctx context.Context, _ int, c redisconn.Conn) error {
		n, err := releaseAnyScript.Exec(ctx, c, []string{d.lockKey(l.Name)}, l.Owner, d.channel(l.Name), "r").Int64()
		if err == nil && n != 1 {
			err = driver.ErrNotHeld
		}
		return err
	}, nil, wasFreed)
}

// wasFreed accepts a release step that freed the name on its master: once a
// quorum did, the release is decided (see Release).
func wasFreed(_ int, err error) bool { return err == nil }

// release runs the release script for l on one master.
func (d *rlDriver) release(ctx context.Context, c redisconn.Conn, l driver.Lease, message string) error {
	n, err := releaseScript.Exec(ctx, c, []string{d.lockKey(l.Name)}, l.Owner, d.channel(l.Name), message).Int64()
	if err == nil && n != 1 {
		err = driver.ErrNotHeld
	}
	return err
}

// releaseOn gives l back on one master that granted it too late, with a
// context of its own bounded by the per-master timeout.
func (d *rlDriver) releaseOn(c redisconn.Conn, l driver.Lease, message string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeoutFor(l.TTL))
	defer cancel()
	d.release(ctx, c, l, message)
}

// errNoAnswer is a master's outcome when it did not answer within the
// per-master timeout.
var errNoAnswer = errors.New("redlock: no answer within the per-master timeout")

func firstErr(votes []vote) error {
	for _, v := range votes {
		if v.err != nil {
			return v.err
		}
	}
	return errors.New("no master answered")
}
