package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// watchdogPeriod is how often dlock checks, while the command runs, that
// the store confirmed the lease recently enough. It is what notices that
// dlock itself was frozen (SIGSTOP, which cannot be caught).
const watchdogPeriod = 100 * time.Millisecond

// supervise runs until the command exits or must be stopped, and returns
// run's exit status.
func (r *runner) supervise(c *child, v *lease, sigs, conts chan os.Signal) error {
	tick := time.NewTicker(watchdogPeriod)
	defer tick.Stop()
	for {
		select {
		case s := <-sigs:
			switch sig := s.(syscall.Signal); sig {
			case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
				// Stop the command first, then dlock, as a shell would.
				c.signal(syscall.SIGSTOP)
				if ev, stopped := c.waitStopped(); !stopped {
					return r.exited(c, ev)
				}
				stopSelf(conts)
				if err := r.resume(c, v); err != nil {
					return err
				}
			default:
				c.signal(sig)
			}
		case <-conts:
			// Sent after a SIGSTOP, which dlock cannot see: check at once
			// rather than at the next tick.
			if v.expired() {
				return r.killExpired(c, v, "was not running")
			}
		case ev := <-c.events:
			if !ev.stopped {
				return r.exited(c, ev)
			}
			if c.tty {
				// Job control: the command stopped at the terminal
				// (Ctrl-Z, or a read from the background). Stop with it,
				// so that the shell sees the job stopped.
				stopSelf(conts)
				if err := r.resume(c, v); err != nil {
					return err
				}
			}
		case <-v.lock.Done():
			if v.expired() {
				return r.killExpired(c, v, "was not running")
			}
			return r.lost(c, v)
		case <-tick.C:
			if v.expired() {
				return r.killExpired(c, v, "was not running")
			}
		}
	}
}

// stopSelf stops dlock and returns once it is continued (conts receives
// SIGCONT). It raises SIGSTOP: the Go runtime keeps its handler for
// SIGTSTP, SIGTTIN and SIGTTOU even after signal.Reset, so their default
// action (stop) cannot be had. Unlike SIGTSTP, SIGSTOP also stops a
// process whose group is orphaned; whoever stopped dlock continues it.
// The wait for SIGCONT matters: kill returns before every thread has
// stopped.
func stopSelf(conts <-chan os.Signal) {
	for len(conts) > 0 {
		<-conts
	}
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-conts
}

// resume continues the stopped command after dlock was continued, unless
// the lease may have run out meanwhile: then the command is killed before
// it runs again.
func (r *runner) resume(c *child, v *lease) error {
	if !v.vouched() {
		return r.killExpired(c, v, "was stopped")
	}
	c.resume()
	return nil
}

// killExpired kills the command at once: the lease may have run out while
// dlock could not renew it, so another holder may be running.
func (r *runner) killExpired(c *child, v *lease, while string) error {
	since := v.since()
	c.kill()
	c.reclaimTerminal()
	return lostStatus("the lease on %q may have run out while dlock %s (%v since the store last confirmed it, TTL %v): killed the command",
		r.name, while, since.Round(time.Millisecond), r.o.ttl)
}

// lost stops the command after the core gave the lock up, before the
// server-side lease can end: SIGTERM, then SIGKILL after --grace.
func (r *runner) lost(c *child, v *lease) error {
	why := plain(context.Cause(v.lock.Context()).Error())
	why = strings.TrimPrefix(why, "lock lost: ")
	r.note("lost the lock %q on %s: %s; stopping the command (SIGTERM, then SIGKILL after %v)", r.name, r.store.shown, why, r.o.grace)
	c.signal(syscall.SIGTERM)
	c.signal(syscall.SIGCONT) // a stopped command could not act on it
	grace := time.NewTimer(r.o.grace)
	defer grace.Stop()
	for {
		select {
		case ev := <-c.events:
			if !ev.stopped {
				c.reclaimTerminal()
				return lostStatus("")
			}
		case <-grace.C:
			c.kill()
			c.reclaimTerminal()
			return lostStatus("")
		}
	}
}

// exited returns the command's exit status as run's.
func (r *runner) exited(c *child, ev childEvent) error {
	c.reclaimTerminal()
	if ev.err != nil {
		return fail(exitError, "wait for the command: %v", ev.err)
	}
	if code := exitCode(ev.status); code != 0 {
		return &exitStatus{code: code}
	}
	return nil
}

// ignoreTTOU lets dlock, in the background, set the terminal's foreground
// group without being stopped for it.
func ignoreTTOU() { signal.Ignore(syscall.SIGTTOU) }
