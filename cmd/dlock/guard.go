package main

import (
	"bufio"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// The guard makes the command's whole process group die with dlock. The
// kernel's death signal (Pdeathsig) reaches only the command itself, not
// what it started: a shell script's own children would run on, without
// the lock, after a kill -9 of dlock. So dlock also starts a guard, a
// second process of this executable in a process group of its own, with a
// pipe from dlock as its stdin. The guard is started before the command,
// and told the command's process group once it exists (arm), so that no
// time passes between the command's start and its guard's: a kill -9 of
// dlock just after the command started its own children once left them
// running, the guard not yet started (TestRunKill9KillsCommandsChildren,
// on a loaded machine). If dlock dies without dismissing the guard (kill
// -9, a crash), the guard reads end-of-file and kills the command's
// process group; when dlock exits normally, it dismisses the guard by
// writing one byte first.

// guardArg is the argument that makes this executable a guard.
const guardArg = "__dlock_guard"

// guard is dlock's end of a started guard.
type guard struct {
	cmd *exec.Cmd
	w   *os.File // dlock's end of the guard's stdin
}

// startGuard starts a guard, not yet armed.
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
	// Its own group: Ctrl-C at the terminal, or a signal to dlock's
	// group, does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, w: w}, nil
}

// arm tells the guard the process group to kill if dlock dies: a line
// with its number, which waits in the pipe if the guard is still
// starting.
func (g *guard) arm(pgid int) error {
	_, err := g.w.WriteString(strconv.Itoa(pgid) + "\n")
	return err
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

// runGuard is the guard's process: it reads the process group to guard
// from stdin, then waits on stdin, and if that ends without the byte
// that dismisses it, kills the group. A dismissal or an end before the
// group is known (dlock failed to start the command) ends it quietly.
func runGuard() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return 0 // dismissed, or dlock gone, before a group was armed
	}
	n, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if err != nil || n <= 1 {
		return exitUsage
	}
	if b, err := in.ReadByte(); err == nil && b == 1 {
		return 0 // dismissed
	}
	syscall.Kill(-n, syscall.SIGKILL)
	return 0
}
