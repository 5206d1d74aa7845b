package main

import (
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// The guard makes the command's whole process group die with dlock. The
// kernel's death signal (Pdeathsig) reaches only the command itself, not
// what it started: a shell script's own children would run on, without
// the lock, after a kill -9 of dlock. So dlock also starts a guard, a
// second process of this executable in a process group of its own, with a
// pipe from dlock as its stdin. If dlock dies without dismissing it (kill
// -9, a crash), the guard reads end-of-file and kills the command's
// process group; when dlock exits normally, it dismisses the guard by
// writing one byte first.

// guardArg is the first argument that makes this executable a guard.
const guardArg = "__dlock_guard"

// guard is dlock's end of a started guard.
type guard struct {
	cmd *exec.Cmd
	w   *os.File // dlock's end of the guard's stdin
}

// startGuard starts a guard over process group pgid.
func startGuard(pgid int) (*guard, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe, guardArg, strconv.Itoa(pgid))
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	// Its own group: Ctrl-C at the terminal, or a signal to dlock's
	// group, does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, w: w}, nil
}

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
// without the byte that dismisses it, kills process group pgid.
func runGuard(pgid string) int {
	n, err := strconv.Atoi(pgid)
	if err != nil || n <= 1 {
		return exitUsage
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	var b [1]byte
	if k, _ := os.Stdin.Read(b[:]); k == 1 {
		return 0 // dismissed
	}
	syscall.Kill(-n, syscall.SIGKILL)
	return 0
}
