package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// child is the command dlock runs, in a process group of its own, which
// its guard leads.
type child struct {
	pid int
	// tty is set when stdin is a terminal: the child's stops are dlock's
	// (job control), and the child has the terminal's foreground whenever
	// dlock would have it.
	tty    bool
	events chan childEvent // from the reaper: each stop, then the exit
	guard  *guard          // kills the child's group if dlock dies (see guard.go)
}

// childEvent is a change of the child's state, as wait reports it.
type childEvent struct {
	stopped bool
	status  syscall.WaitStatus
	err     error // wait failed
}

// startChild starts argv with env. Its process group is its own (its
// guard's, see guard.go); when
// stdin is the terminal and dlock has the terminal's foreground, the
// child's group gets it, so the child reads the terminal and gets its
// Ctrl-C, Ctrl-\ and Ctrl-Z as it would under flock.
//
// The kernel kills the child if dlock dies, even by SIGKILL: Pdeathsig
// fires when the thread that forked the child ends, so the child is
// started and reaped by one goroutine locked to its thread, which exits
// after the child has. A guard process (guard.go) kills the rest of the
// child's process group then too.
func startChild(argv, env []string, tty bool) (*child, error) {
	c := &child{events: make(chan childEvent, 4), tty: tty}
	g, err := startGuard() // first: see guard.go
	if err != nil {
		return nil, err
	}
	c.guard = g
	started := make(chan error, 1)
	go func() { // owns the child: exits once the child has exited and been reaped
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid()}
		if c.tty && foreground(0) {
			cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
		}
		dieWithParent(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.pid = cmd.Process.Pid
		started <- nil
		for {
			var ws syscall.WaitStatus
			_, err := syscall.Wait4(c.pid, &ws, syscall.WUNTRACED, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				c.events <- childEvent{err: err}
				return
			}
			if ws.Stopped() {
				c.events <- childEvent{stopped: true, status: ws}
				continue
			}
			c.events <- childEvent{status: ws}
			return
		}
	}()
	if err := <-started; err != nil {
		g.dismiss()
		return nil, err
	}
	return c, nil
}

// done dismisses the guard: dlock is about to exit normally, after the
// child did.
func (c *child) done() { c.guard.dismiss() }

// signal sends sig to the child's process group.
func (c *child) signal(sig syscall.Signal) { syscall.Kill(-c.guard.pgid(), sig) }

// waitStopped waits up to a second for the stop of a child just sent
// SIGSTOP. It reports false, with the event, if the child exited instead.
func (c *child) waitStopped() (childEvent, bool) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case ev := <-c.events:
		return ev, ev.stopped
	case <-t.C:
		return childEvent{}, true // stopped already, or about to be
	}
}

// kill kills the child's group and waits for the child to exit.
func (c *child) kill() {
	c.signal(syscall.SIGKILL)
	for ev := range c.events {
		if !ev.stopped {
			return
		}
	}
}

// resume gives the child the terminal's foreground if dlock has it, and
// continues the child's group.
func (c *child) resume() {
	if c.tty && foreground(0) {
		unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, c.guard.pgid())
	}
	c.signal(syscall.SIGCONT)
}

// reclaimTerminal takes the terminal's foreground back from the child's
// group, if it has it, when the child has exited. SIGTTOU, which the
// kernel sends a background process that sets the foreground, is
// ignored from here on.
func (c *child) reclaimTerminal() {
	if !c.tty {
		return
	}
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil || pgrp != c.guard.pgid() {
		return
	}
	ignoreTTOU()
	unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
}

// isTerminal reports whether fd is a terminal that is this process's
// controlling terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil
}

// foreground reports whether this process's group has the foreground of
// the terminal fd.
func foreground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == syscall.Getpgrp()
}

// exitCode is the command's exit status as a shell reports it: its code,
// or 128+N if signal N killed it.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
