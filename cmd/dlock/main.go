// Command dlock runs commands under distributed locks, inspects locks, and
// demonstrates why locks need fencing tokens.
//
//	dlock run [--store URL] [--ttl D] [--wait D | --try] [--grace D] NAME -- COMMAND [ARGS...]
//	dlock status [--store URL] [--json] [NAME...]
//	dlock release --force [--store URL] NAME
//	dlock demo [--store URL] [--workers N] [--procs P] [--stock S] [--no-lock] [--pause]
//
// The store is a URL (see dlock.Open): --store, else $DLOCK_STORE, else a
// SQLite file in the user's state directory, so that the tool works on a
// machine with nothing installed.
//
// Exit status: the command's own for run; 75 when a lock was not acquired
// (--try, or --wait elapsed); 69 when the lock was lost while the command
// ran (the command is stopped); 64 for usage errors; 128+N when stopped
// by signal N while waiting; 1 for other errors.
package main

import (
	"errors"
	"fmt"
	"os"
)

// Exit statuses (sysexits.h where one fits).
const (
	exitError       = 1
	exitUsage       = 64 // EX_USAGE
	exitLost        = 69 // EX_UNAVAILABLE: the lock went away under the command
	exitNotAcquired = 75 // EX_TEMPFAIL: try again later
)

// exitError carries an exit status and a message for main to print.
type exitStatus struct {
	code int
	msg  string // printed to stderr with a "dlock: " prefix, if not empty
}

func (e *exitStatus) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitStatus{code: code, msg: fmt.Sprintf(format, args...)}
}

func main() {
	os.Exit(execute(os.Args[1:]))
}

func execute(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var st *exitStatus
	if errors.As(err, &st) {
		if st.msg != "" {
			fmt.Fprintln(os.Stderr, "dlock:", st.msg)
		}
		return st.code
	}
	fmt.Fprintln(os.Stderr, "dlock:", err)
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}
