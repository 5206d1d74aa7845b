package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// The guard makes the command's whole process group die with dlock. The
// kernel's death signal (Pdeathsig) reaches only the command itself, not
// what it started: a shell script's own children would run on, without
// the lock, after a kill -9 of dlock. So dlock first starts a guard, a
// second process of this executable, as the leader of a new process group
// with a pipe from dlock as its stdin, and then starts the command in the
// guard's group. If dlock dies without dismissing the guard (kill -9, a
// crash), the guard reads end-of-file and kills its group: the command and
// everything it started there, and itself. When dlock exits normally, it
// dismisses the guard by writing one byte first.
//
// The group is the guard's from the start so that no moment passes with
// the command running and no guard knowing its group. Two earlier designs
// had one: a guard started after the command, then a guard told the
// command's group once the command was running; a kill -9 of dlock in
// between left the command's children running
// (TestRunKill9KillsCommandsChildren: 2 runs in 60 beside four CPU hogs
// with the second design).
//
// The guard ignores every signal it can, as the command's group gets the
// terminal's signals and those dlock forwards; a SIGSTOP to the group
// stops it too, and a kill -9 of dlock then orphans the group, so the
// kernel continues it (with SIGHUP, ignored) and it acts.

// guardArg is the argument that makes this executable a guard.
const guardArg = "__dlock_guard"

// guard is dlock's end of a started guard.
type guard struct {
	cmd *exec.Cmd
	w   *os.File // dlock's end of the guard's stdin
}

// startGuard starts a guard, leader of a new process group.
func startGuard() (*guard, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe, guardArg)
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	// A group of its own, which the command joins: a signal to dlock's
	// group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, w: w}, nil
}

// pgid is the guard's process group, in which dlock starts the command.
func (g *guard) pgid() int { return g.cmd.Process.Pid }

// dismiss tells the guard dlock is exiting normally. It does not wait for
// the guard, which may still be starting: the byte waits in the pipe, and
// the guard exits once it has read it; a goroutine reaps it then, so
// that `dlock lead` leaves no zombie per term.
func (g *guard) dismiss() {
	g.w.Write([]byte{1})
	g.w.Close()
	go g.cmd.Wait() // exits when the guard does
}

// runGuard is the guard's process: it waits on stdin, and if that ends
// without the byte that dismisses it, kills its process group.
func runGuard() int {
	signal.Ignore()
	b := make([]byte, 1)
	if n, _ := os.Stdin.Read(b); n == 1 && b[0] == 1 {
		return 0 // dismissed
	}
	syscall.Kill(-syscall.Getpgrp(), syscall.SIGKILL)
	return 0
}
