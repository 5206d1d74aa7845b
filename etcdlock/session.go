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
)

// session is one etcd lease that the driver keeps alive.
type session struct {
	id   clientv3.LeaseID
	ttl  time.Duration // as granted
	done chan struct{} // closed when the session is lost

	dead atomic.Bool // set once, with etcdDriver.mu held

	// Guarded by etcdDriver.mu.
	safeUntil time.Time // the lease cannot expire on the server before this
}

// lossAt is when the driver gives the session up unless a keep-alive
// succeeds first: a tenth of the TTL before the lease can expire, which
// also covers clock rate differences with the server.
func (s *session) lossAt() time.Time { return s.safeUntil.Add(-s.ttl / 10) }

func (d *etcdDriver) Losses() <-chan driver.Loss { return d.leases.Losses() }

// session returns the live session, granting a new lease if there is none.
func (d *etcdDriver) session(ctx context.Context) (*session, error) {
	d.mu.Lock()
	s := d.sess
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, dlock.ErrClosed
	}
	if s != nil {
		return s, nil
	}
	start := time.Now()
	resp, err := d.cli.Grant(ctx, d.sessionTTL)
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	s = &session{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, done: make(chan struct{})}
	s.safeUntil = start.Add(s.ttl)
	d.mu.Lock()
	if d.closed || d.sess != nil {
		// Closed meanwhile, or another call granted one first.
		other := d.sess
		d.mu.Unlock()
		d.revoke(s.id)
		if other == nil {
			return nil, dlock.ErrClosed
		}
		return other, nil
	}
	d.sess = s
	d.bg.Add(1)
	go d.keepAlive(s) // exits when s dies or the driver closes
	d.mu.Unlock()
	return s, nil
}

// keepAlive renews s every third of its TTL until s is lost or the driver
// closes. If no renewal succeeds before s.lossAt, or the lease is gone, it
// reports every lease of s lost.
func (d *etcdDriver) keepAlive(s *session) {
	defer d.bg.Done()
	timer := time.NewTimer(s.ttl / 3)
	defer timer.Stop()
	for {
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
	s.dead.Store(true)
	close(s.done)
	if d.sess == s {
		d.sess = nil
	}
	d.mu.Unlock()
	err := fmt.Errorf("%w (lease %x)", cause, s.id)
	d.leases.Lose(func(e entry) error {
		if e.sess == s {
			return err
		}
		return nil
	})
	d.revoke(s.id)
}

// revoke revokes a lease the driver gave up, with one bounded call.
func (d *etcdDriver) revoke(id clientv3.LeaseID) {
	ctx, cancel := sessionlock.CleanupContext()
	defer cancel()
	d.cli.Revoke(ctx, id) // on failure the lease expires by itself
}

// alive reports whether s is still the driver's live session.
func (d *etcdDriver) alive(s *session) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !s.dead.Load() && time.Now().Before(s.lossAt())
}
