package dlockprometheus

import (
	"context"

	"github.com/dlock-go/dlock/hook"
)

// Hook returns the hook that records a Locker's work in c: add it with
// dlock.Locker.AddHook, on any number of Lockers. A Collector made with
// invalid Options returns a Hook that records nothing.
func (c *Collector) Hook() hook.Hook {
	if c.err != nil {
		return hook.Hook{}
	}
	return hook.Hook{
		AcquireStart: c.acquireStart,
		AcquireDone:  c.acquireDone,
		Reentered:    c.reentered,
		Renewed:      c.renewed,
		Lost:         c.lost,
		Released:     c.released,
	}
}

func (c *Collector) acquireStart(_ context.Context, e hook.AcquireStart) context.Context {
	if e.Wait {
		c.lock(e.Backend, e.Name).waiters.Inc()
	}
	return nil
}

func (c *Collector) acquireDone(_ context.Context, e hook.AcquireDone) {
	s := c.lock(e.Backend, e.Name)
	if e.Wait {
		s.waiters.Dec()
	}
	o := min(max(e.Outcome, hook.Acquired), hook.AcquireFailed)
	d := e.Duration.Seconds()
	s.acquireDuration[o].Observe(d)
	s.acquisitions[o].Inc()
	if e.Contended {
		s.contentions.Inc()
	}
	if o == hook.Acquired {
		s.held.Inc()
		if e.Contended {
			s.acquireWait.Observe(d)
		}
	}
	if e.Ahead >= 0 {
		c.queueAhead.WithLabelValues(s.labels...).Observe(float64(e.Ahead))
	}
}

func (c *Collector) reentered(_ context.Context, e hook.Reentry) {
	c.lock(e.Backend, e.Name).reentries.Inc()
}

func (c *Collector) renewed(e hook.Renewal) {
	s := c.renewal(e.Backend)
	s.duration.Observe(e.Duration.Seconds())
	for i, n := range [...]int{e.Renewed, e.NotHeld, e.Failed} {
		if n > 0 {
			s.leases[i].Add(float64(n))
		}
	}
	if n := e.NotHeld + e.Failed; n > 0 {
		s.failures.Add(float64(n))
	}
}

func (c *Collector) lost(_ context.Context, e hook.Loss) {
	s := c.lock(e.Backend, e.Name)
	s.losses[min(max(e.Reason, hook.LossExpired), hook.LossReported)].Inc()
	s.holdDuration.Observe(e.Held.Seconds())
	s.held.Dec()
}

func (c *Collector) released(_ context.Context, e hook.Release) {
	s := c.lock(e.Backend, e.Name)
	s.releases[min(max(e.Outcome, hook.Released), hook.ReleaseFailed)].Inc()
	s.holdDuration.Observe(e.Held.Seconds())
	s.held.Dec()
}
