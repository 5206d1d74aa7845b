package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlock-go/dlock"
)

// runOptions are run's flags.
type runOptions struct {
	ttl, wait, grace, connectTimeout time.Duration
	try, waitSet                     bool
	conflictCode                     int
	quiet, verbose                   bool
}

func newRunCmd() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [flags] NAME [--] COMMAND [ARGS...]",
		Short: "Run a command while holding a lock",
		Long: `Run takes the lock NAME, runs COMMAND with DLOCK_NAME and DLOCK_FENCE in its
environment, and releases the lock when the command exits, exiting with the
command's status. The lease is renewed every TTL/3 while the command runs.
Flags go anywhere before "--"; without "--", before NAME (the words after
NAME are the command). Durations take bare seconds ("10") or Go durations
("1m30s").

The command lives and dies with the lock:
  - If the lock is lost while it runs, its process group gets SIGTERM, then
    SIGKILL after --grace, and run exits 69.
  - If dlock is killed, even by SIGKILL, the kernel kills the command.
  - Stopped (Ctrl-Z, SIGTSTP, SIGTTIN, SIGTTOU), dlock stops the command
    with it; continued, it continues the command only if the lease cannot
    have run out meanwhile (it is renewed until the stop, so a stop of up
    to about half the TTL is safe). Otherwise the stopped command is
    killed, never to run on, and run exits 69. The same holds after a
    SIGSTOP, which dlock cannot catch: when it runs again and the lease
    may have run out, the command is killed at once.
With a terminal on stdin, the command is in the terminal's foreground, so
it reads the terminal and gets Ctrl-C, Ctrl-\ and Ctrl-Z itself; otherwise
it runs in its own process group. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1, SIGUSR2 and SIGWINCH sent to dlock are passed on to it. Neither
$DLOCK_PASSWORD nor a $DLOCK_STORE holding a password reaches it.

Exit status:
  the command's   the command ran (128+N if signal N killed it)
  75              not acquired: --try, or --wait elapsed (see --conflict-exit-code)
  69              the lock was lost, or may have run out, while the command ran
  74              the store could not be reached (--connect-timeout) or failed
  64              usage error: bad flag, name, duration or store URL; nothing contacted
  126, 127        the command could not be run, or was not found
  128+N           signal N arrived while waiting for the lock
When the command ends, the lock is released; if the store does not answer
within a second, dlock exits anyway and the lease ends by itself.`,
		Example: `  dlock run nightly-report -- ./report.sh --since yesterday
  dlock run -n --quiet --store redis://cache:6379 nightly -- ./report.sh   # cron
  dlock run migrate --wait 1m --ttl 60 -- ./migrate up`,
		DisableFlagParsing: true, // flags go anywhere before "--": see parseRunArgs
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv, err := parseRunArgs(cmd, args, &o)
			if errors.Is(err, pflag.ErrHelp) {
				return cmd.Help()
			}
			if err != nil {
				return err
			}
			return runLocked(cmd, name, argv, o)
		},
	}
	f := c.Flags()
	f.Var(seconds{&o.ttl}, "ttl", "lease length; renewed every TTL/3 while the command runs")
	f.VarP(seconds{&o.wait}, "wait", "w", "give up after waiting this long (exit 75); 0 does not wait, as --try (default: wait until acquired)")
	f.BoolVarP(&o.try, "try", "n", false, "do not wait: exit 75 at once if the lock is held")
	f.Var(seconds{&o.grace}, "grace", "after the lock is lost, time between SIGTERM and SIGKILL")
	f.IntVarP(&o.conflictCode, "conflict-exit-code", "E", exitNotAcquired, "exit status when the lock is not acquired")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing when the lock is not acquired (for cron)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "say what happens: the store, waiting and for whom, acquisition with its fence, loss, release")
	o.ttl, o.grace = 15*time.Second, 10*time.Second
	return c
}

// parseRunArgs parses run's arguments: flags and NAME before "--", the
// command after it; without "--", flags before NAME and the command after
// NAME. Every check that needs no store is made here, so that a usage
// error contacts nothing.
func parseRunArgs(cmd *cobra.Command, args []string, o *runOptions) (string, []string, error) {
	cmd.InheritedFlags() // merges --store into cmd.Flags()
	f := cmd.Flags()
	before, argv := args, []string(nil)
	dash := slices.Index(args, "--")
	if dash >= 0 {
		before, argv = args[:dash], args[dash+1:]
	}
	f.SetInterspersed(dash >= 0)
	if err := f.Parse(before); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return "", nil, err
		}
		return "", nil, usageError{fmt.Errorf("run: %w", err)}
	}
	if help, _ := f.GetBool("help"); help {
		return "", nil, pflag.ErrHelp
	}
	pos := f.Args()
	switch {
	case len(pos) == 0:
		return "", nil, usageError{errors.New("run: no lock NAME given (usage: dlock run [flags] NAME -- COMMAND [ARGS...])")}
	case dash < 0:
		argv = pos[1:]
	case len(pos) > 1:
		return "", nil, usageError{fmt.Errorf("run: one NAME before \"--\", got %q", pos)}
	}
	name := pos[0]
	if len(argv) == 0 {
		return "", nil, usageError{fmt.Errorf("run: no COMMAND given after NAME %q (usage: dlock run [flags] NAME -- COMMAND [ARGS...])", name)}
	}
	o.waitSet = f.Changed("wait")
	o.connectTimeout = connectTimeout(cmd) // --wait bounds it too: see runLocked
	if o.try && o.waitSet {
		return "", nil, usageError{errors.New("run: --try and --wait exclude each other")}
	}
	if o.waitSet && o.wait == 0 {
		o.try = true // flock's -w 0
	}
	switch {
	case o.wait < 0 || o.grace < 0:
		return "", nil, usageError{errors.New("run: --wait and --grace must not be negative")}
	case o.connectTimeout <= 0:
		return "", nil, usageError{errors.New("run: --connect-timeout must be positive")}
	case o.ttl < dlock.MinTTL || o.ttl > dlock.MaxTTL:
		return "", nil, usageError{fmt.Errorf("run: --ttl %v out of range [%v, %v]", o.ttl, dlock.MinTTL, dlock.MaxTTL)}
	case o.conflictCode < 0 || o.conflictCode > 255:
		return "", nil, usageError{fmt.Errorf("run: --conflict-exit-code %d is not an exit status (0-255)", o.conflictCode)}
	case o.quiet && o.verbose:
		return "", nil, usageError{errors.New("run: --quiet and --verbose exclude each other")}
	}
	if err := dlock.ValidateName(name); err != nil {
		return "", nil, badName("run", name, err)
	}
	return name, argv, nil
}
