package zklock

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

var (
	errSessionChanged = errors.New("zklock: zookeeper session expired")
	errSuspended      = errors.New("zklock: zookeeper connection lost")
)

func (d *zkDriver) Losses() <-chan driver.Loss { return d.losses }

// watchSession is the driver's goroutine, started by New; it exits when
// Close closes d.closing. While the driver holds leases or has orphaned
// children it reads the connection's state every SessionPollInterval:
// leases whose session is no longer the connection's, or held through a
// connection lost for longer than d.suspend, are reported lost and their
// children become orphans; orphans are deleted whenever the connection is
// up.
func (d *zkDriver) watchSession() {
	defer d.bg.Done()
	tick := time.NewTicker(SessionPollInterval)
	defer tick.Stop()
	var downSince time.Time
	for {
		d.mu.Lock()
		idle := len(d.leases) == 0 && len(d.orphans) == 0
		d.mu.Unlock()
		if idle {
			downSince = time.Time{}
			select {
			case <-d.kick:
			case <-d.closing:
				return
			}
		}
		select {
		case <-tick.C:
		case <-d.closing:
			return
		}
		up := d.conn.State() == zk.StateHasSession
		switch {
		case up:
			downSince = time.Time{}
		case downSince.IsZero():
			downSince = time.Now()
		}
		lost := d.lost(d.conn.SessionID(), !up && time.Since(downSince) >= d.suspend)
		for _, loss := range lost {
			select {
			case d.losses <- loss:
			case <-d.closing:
				return
			}
		}
		if up {
			d.startReaper()
		}
	}
}

// lost forgets and returns the leases that are lost: those of another
// session than session, or all of them if suspended. Their children
// become orphans.
func (d *zkDriver) lost(session int64, suspended bool) []driver.Loss {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []driver.Loss
	for owner, ls := range d.leases {
		var err error
		switch {
		case ls.session != session:
			err = fmt.Errorf("%w (session 0x%x)", errSessionChanged, ls.session)
		case suspended:
			err = errSuspended
		default:
			continue
		}
		ls.timer.Stop()
		delete(d.leases, owner)
		d.orphans[ls.path] = struct{}{}
		out = append(out, driver.Loss{Owner: owner, Err: err})
	}
	return out
}

// startReaper starts a goroutine that deletes the current orphans, unless
// one is running. The goroutine exits after one bounded delete per orphan,
// so that a slow server never delays loss detection; Close waits for it.
func (d *zkDriver) startReaper() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reaping || d.closed || len(d.orphans) == 0 {
		return
	}
	paths := make([]string, 0, len(d.orphans))
	for p := range d.orphans {
		paths = append(paths, p)
	}
	d.reaping = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx, cancel := cleanupContext()
		defer cancel()
		for _, p := range paths {
			d.reap(ctx, p)
		}
		d.mu.Lock()
		d.reaping = false
		d.mu.Unlock()
	}()
}
