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

func (d *zkDriver) Losses() <-chan driver.Loss { return d.leases.Losses() }

// watchSession is the driver's goroutine, started by New; it exits when
// Close closes d.closing. While the driver holds leases or has orphaned
// children it reads the connection's state every sessionPollInterval:
// leases whose session is no longer the connection's, or held through a
// connection lost for longer than d.suspend, are reported lost and their
// children become orphans; orphans are deleted whenever the connection is
// up.
func (d *zkDriver) watchSession() {
	defer d.bg.Done()
	tick := time.NewTicker(sessionPollInterval)
	defer tick.Stop()
	var downSince time.Time
	for {
		if !d.leases.Busy() {
			downSince = time.Time{}
			select {
			case <-d.leases.Changed():
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
		suspended := !up && time.Since(downSince) >= d.suspend
		session := d.conn.SessionID()
		d.leases.Lose(func(e entry) error {
			switch {
			case e.session != session:
				return fmt.Errorf("%w (session 0x%x)", errSessionChanged, e.session)
			case suspended:
				return errSuspended
			}
			return nil
		})
		if up {
			d.leases.StartReap()
		}
	}
}
