// Command dlock runs commands under distributed locks, inspects locks, and
// demonstrates why locks need fencing tokens.
//
//	dlock run [flags] [--shared | --limit N] NAME [--] COMMAND [ARGS...]
//	dlock lead [flags] NAME [--] COMMAND [ARGS...]
//	dlock observe [--store URL] [--json] NAME
//	dlock status [--store URL] [--json | --watch [--interval D]] [NAME...]
//	dlock release --force [--store URL] NAME
//	dlock demo [--store URL] [--workers N] [--procs P] [--stock S] [--no-lock] [--pause]
//
// The store is a URL (see dlock.Open): --store, else $DLOCK_STORE, else a
// SQLite file in the user's state directory, so that the tool works on a
// machine with nothing installed.
//
// Exit status: the command's own for run and lead; 75 (or
// --conflict-exit-code) when a lock was not acquired (--try, or --wait
// elapsed); 69 when the lock was lost while the command ran (the command
// is stopped; lead campaigns again instead); 74 when the store cannot be
// reached; 77 when it refuses the credentials or a step they are not
// granted; 73 when it refuses writes for lack of space (etcd's NOSPACE
// alarm, Redis at maxmemory, a full disk); 65 when the name is held in another mode (a lock against a
// semaphore, or another --limit); 64 for usage errors (and --shared or
// --limit on a store without them); 128+N when stopped by signal N while
// waiting; 1 for other errors (demo: the lock did not prevent
// overselling).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dlock-go/dlock"
)

// Exit statuses (sysexits.h where one fits).
const (
	exitError       = 1
	exitUsage       = 64 // EX_USAGE: bad flag, name, URL or duration; nothing was contacted
	exitMode        = 65 // EX_DATAERR: the name is held in another mode (lock or semaphore, or another limit)
	exitLost        = 69 // EX_UNAVAILABLE: the lock went away under the command
	exitStore       = 74 // EX_IOERR: the store could not be reached or failed
	exitNotAcquired = 75 // EX_TEMPFAIL: try again later
	exitDenied      = 77 // EX_NOPERM: the store refused the credentials or a step (dlock.ErrDenied)
	exitNoSpace     = 73 // EX_CANTCREAT: the store refuses writes for lack of space (dlock.ErrNoSpace)
)

// exitStatus carries an exit status and a message for main to print.
type exitStatus struct {
	code int
	msg  string // printed to stderr with a "dlock: " prefix, if not empty
	lost bool   // the lock was lost under the command, which was stopped (exit 69)
}

func (e *exitStatus) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitStatus{code: code, msg: fmt.Sprintf(format, args...)}
}

// lostStatus is exit status 69, after the lock was lost under the command
// (or before it started) and the command was stopped: what ends a run,
// and what makes lead campaign again.
func lostStatus(format string, args ...any) error {
	return &exitStatus{code: exitLost, msg: fmt.Sprintf(format, args...), lost: true}
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int {
	if len(args) == 1 && args[0] == guardArg {
		return runGuard()
	}
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.msg != "" {
			warn("%s", st.msg)
		}
		return st.code
	}
	warn("%v", err)
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}

// warn prints one line to stderr with one "dlock: " prefix, however many
// the message already carries (errors from package dlock start with one),
// and the lines of a multi-line error (pgx writes them) joined.
func warn(format string, args ...any) {
	lines := strings.Split(plain(fmt.Sprintf(format, args...)), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	fmt.Fprintln(os.Stderr, "dlock: "+strings.Join(lines, " "))
}

// badName is the usage error for a lock name driver.ValidateName rejects.
func badName(cmd, name string, err error) error {
	why := plain(strings.TrimSuffix(err.Error(), ": "+dlock.ErrInvalid.Error()))
	if len(name) > 40 {
		name = name[:40] + "..."
	}
	return usageError{fmt.Errorf("%s: bad lock name %q: %s", cmd, name, why)}
}

// plain strips the "dlock: " prefixes an error message starts with, and
// those of the sentinels that backends wrap inside it
// ("redislock: connect: dlock: denied by the store: ...").
func plain(msg string) string {
	msg = strings.ReplaceAll(msg, ": dlock: ", ": ")
	for {
		rest, ok := strings.CutPrefix(msg, "dlock: ")
		if !ok {
			return msg
		}
		msg = rest
	}
}
