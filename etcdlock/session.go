package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sessionlock"
)

var (
	errLeaseGone    = errors.New("etcdlock: session lease revoked or expired")
	errLeaseExpired = errors.New("etcdlock: session lease could not be renewed in time")
	errLeaseIdle    = errors.New("etcdlock: session lease revoked: no key was attached to it")
)

// session is one etcd lease that the driver keeps alive: the lease of
// every acquisition whose TTL, rounded up to whole seconds, is secs (or of
// every acquisition, with Options.SessionTTL set).
type session struct {
	id   clientv3.LeaseID
	secs int64         // the TTL asked for: its key in etcdDriver.sessions
	ttl  time.Duration // as granted
	done chan struct{} // closed when the session is lost

	dead atomic.Bool // set once, with etcdDriver.mu held
	// delays is set once a key with a lock-delay joined the session: a
	// lost session is then left to expire on the server, not revoked.
	delays atomic.Bool

	// Guarded by etcdDriver.mu.
	safeUntil time.Time // the lease cannot expire on the server before this
	joining   int       // acquisitions between session and the end of their put
	handed    uint64    // how many times session returned it
}

// lossAt is when the driver gives the session up unless a keep-alive
// succeeds first: a tenth of the TTL before the lease can expire, which
// also covers clock rate differences with the server.
func (s *session) lossAt() time.Time { return s.safeUntil.Add(-s.ttl / 10) }

func (d *etcdDriver) Losses() <-chan driver.Loss { return d.leases.Losses() }

// leaseSeconds returns the TTL, in whole seconds, of the session for an
// acquisition with TTL ttl: Options.SessionTTL's if set, else ttl rounded
// up (driver.DefaultTTL for none), and at least minLeaseSeconds.
func (d *etcdDriver) leaseSeconds(ttl time.Duration) int64 {
	if d.sessionTTL > 0 {
		return d.sessionTTL
	}
	if ttl <= 0 {
		ttl = driver.DefaultTTL
	}
	return max(ceilSeconds(ttl), minLeaseSeconds)
}

// minLeaseSeconds is the shortest session lease: etcd's own minimum with
// its default timing (1.5 election timeouts of 1 s, rounded up). A
// server tuned for shorter timeouts would grant 1 s, whose keep-alive
// must then succeed every 0.9 s, which a loaded server or client misses
// (a 1 s lock failed its renewals so in a test run beside a fault
// suite). The lock's own TTL still bounds its holder's Done; only a dead
// holder's takeover waits for the longer lease.
const minLeaseSeconds = 2

// session returns the live session for an acquisition with TTL ttl,
// granting a new lease if there is none, and counts the caller among
// those joining it: the caller calls joined once its key is put or
// given up.
func (d *etcdDriver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	return d.sessionOf(ctx, d.leaseSeconds(ttl))
}

// sessionOf is session for the lease of secs seconds.
func (d *etcdDriver) sessionOf(ctx context.Context, secs int64) (*session, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, dlock.ErrClosed
	}
	if s := d.sessions[secs]; s != nil {
		d.handOut(s)
		d.mu.Unlock()
		return s, nil
	}
	d.mu.Unlock()
	start := time.Now()
	resp, err := d.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	s := &session{id: resp.ID, secs: secs, ttl: time.Duration(resp.TTL) * time.Second, done: make(chan struct{})}
	s.safeUntil = start.Add(s.ttl)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		d.revoke(s.id)
		return nil, dlock.ErrClosed
	}
	if other := d.sessions[secs]; other != nil {
		// Another call granted one first.
		d.handOut(other)
		d.mu.Unlock()
		d.revoke(s.id)
		return other, nil
	}
	d.sessions[secs] = s
	d.handOut(s)
	d.bg.Add(1)
	go d.keepAlive(s) // exits when s dies or the driver closes
	d.mu.Unlock()
	return s, nil
}

// grantFirst grants the session of driver.DefaultTTL (or of
// Options.SessionTTL), for Open: it is the one an acquisition without
// WithTTL uses, and is revoked in time if unused (see reapIdle).
func (d *etcdDriver) grantFirst(ctx context.Context) error {
	s, err := d.session(ctx, driver.DefaultTTL)
	if err == nil {
		d.joined(s)
	}
	return err
}

// handOut counts a caller of session among those joining s. d.mu is held.
func (d *etcdDriver) handOut(s *session) {
	s.joining++
	s.handed++
}

// joined ends what handOut counted: the caller's key is on the server
// (attached to s) or will not be.
func (d *etcdDriver) joined(s *session) {
	d.mu.Lock()
	s.joining--
	d.mu.Unlock()
}

// keepAlive renews s every third of its TTL until s is lost, idle or the
// driver closes. If no renewal succeeds before s.lossAt, or the lease is
// gone, it reports every lease of s lost. Every third renewal, it revokes
// s if no key is attached to it (see reapIdle).
func (d *etcdDriver) keepAlive(s *session) {
	defer d.bg.Done()
	timer := time.NewTimer(s.ttl / 3)
	defer timer.Stop()
	for renewals := 0; ; {
		select {
		case <-timer.C:
		case <-d.ctx.Done():
			return
		}
		d.mu.Lock()
		lossAt, dead := s.lossAt(), s.dead.Load()
		d.mu.Unlock()
		if dead {
			return // lost through a failed call: keep it alive no longer
		}
		if !time.Now().Before(lossAt) {
			d.lose(s, errLeaseExpired)
			return
		}
		start := time.Now()
		ctx, cancel := context.WithDeadline(d.ctx, lossAt)
		resp, err := d.cli.KeepAliveOnce(ctx, s.id)
		cancel()
		switch {
		case err == nil:
			d.mu.Lock()
			if until := start.Add(time.Duration(resp.TTL) * time.Second); until.After(s.safeUntil) {
				s.safeUntil = until
			}
			d.mu.Unlock()
			d.leases.StartReap()
			if renewals++; renewals%3 == 0 && d.reapIdle(s) {
				return
			}
			timer.Reset(s.ttl / 3)
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			d.lose(s, errLeaseGone)
			return
		case d.ctx.Err() != nil:
			return
		default:
			// Unknown outcome: try again soon; lossAt bounds the attempts.
			timer.Reset(min(s.ttl/10, time.Until(lossAt)))
		}
	}
}

// lose marks s dead, reports its leases lost, and revokes it so that its
// keys go at once if the server still has it.
func (d *etcdDriver) lose(s *session, cause error) {
	d.mu.Lock()
	if s.dead.Load() {
		d.mu.Unlock()
		return
	}
	d.markDead(s)
	d.mu.Unlock()
	d.reportLost(s, cause)
}

// markDead marks s dead and forgets it: later acquisitions get another
// session. d.mu is held and s is not dead yet.
func (d *etcdDriver) markDead(s *session) {
	s.dead.Store(true)
	close(s.done)
	if d.sessions[s.secs] == s {
		delete(d.sessions, s.secs)
	}
}

// reportLost reports the leases of s, which is dead, lost with cause, and
// revokes s, unless a key with a lock-delay joined it: its lease then
// runs out on the server, TTL+delay after its last renewal, and the
// lost keys become orphans that reaping moves to leases of their delay.
func (d *etcdDriver) reportLost(s *session, cause error) {
	err := fmt.Errorf("%w (lease %x)", cause, s.id)
	d.leases.Lose(func(e entry) error {
		if e.sess == s {
			return err
		}
		return nil
	})
	if !s.delays.Load() {
		d.revoke(s.id)
	}
}

// reapIdle revokes s and returns true if no key is attached to it on the
// server and no acquisition is about to attach one, so that a Locker
// keeps no lease (and no keep-alive loop) for a TTL it no longer uses. An
// acquisition that took s from session before the count below was read
// has put its key by then (joining is 0); one that takes it afterwards
// changes handed, and s is kept.
func (d *etcdDriver) reapIdle(s *session) bool {
	d.mu.Lock()
	joining, handed := s.joining, s.handed
	d.mu.Unlock()
	if joining > 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(d.ctx, s.ttl/3)
	resp, err := d.cli.TimeToLive(ctx, s.id, clientv3.WithAttachedKeys())
	cancel()
	if err != nil || len(resp.Keys) > 0 {
		return false // the lease's end, if that is the error, is the next renewal's
	}
	d.mu.Lock()
	if s.dead.Load() || s.handed != handed {
		d.mu.Unlock()
		return false
	}
	d.markDead(s)
	d.mu.Unlock()
	d.reportLost(s, errLeaseIdle) // a key someone else deleted may still be held here
	if s.delays.Load() {
		d.revoke(s.id) // no key on it: nothing of a lock-delay to keep
	}
	return true
}

// revoke revokes a lease the driver gave up, with one bounded call.
func (d *etcdDriver) revoke(id clientv3.LeaseID) {
	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	d.cli.Revoke(ctx, id) // on failure the lease expires by itself
}

// alive reports whether s is still live: not lost, and not about to be.
func (d *etcdDriver) alive(s *session) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !s.dead.Load() && time.Now().Before(s.lossAt())
}
