package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlock-go/dlock/driver"
)

// runOptions are run's flags.
type runOptions struct {
	ttl, wait, grace, connectTimeout time.Duration
	lockDelay                        time.Duration // --lock-delay: the name stays taken this long after a lease that ran out
	try, waitSet                     bool
	conflictCode                     int
	quiet, verbose                   bool
	recordCommand                    bool // --record-command: store the command line in the lock's metadata
	shared                           bool // --shared: a shared (read) hold
	limit                            int  // --limit: a permit of a semaphore of limit; 0 for a lock
}

func newRunCmd() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [flags] NAME [--] COMMAND [ARGS...]",
		Short: "Run a command while holding a lock",
		Long:  runLong,
		Example: `  dlock run nightly-report -- ./report.sh --since yesterday
  dlock run -n --quiet --store redis://cache:6379 nightly -- ./report.sh   # cron
  dlock run migrate --wait 1m --ttl 60 -- ./migrate up
  dlock run -s catalog -- ./read-catalog.sh      # many readers at once (flock -s)
  dlock run catalog -- ./rebuild-catalog.sh      # the writer runs alone
  dlock run --limit 3 exports -- ./export.sh     # at most 3 exports at once (consul lock -n 3)`,
		DisableFlagParsing: true, // flags go anywhere before "--": see parseRunArgs
		RunE:               holdCommand(&o, false),
	}
	f := c.Flags()
	f.VarP(seconds{&o.wait}, "wait", "w", "give up after waiting this long (exit 75); 0 does not wait, as --try (default: wait until acquired)")
	f.BoolVarP(&o.try, "try", "n", false, "do not wait: exit 75 at once if the lock is held")
	f.IntVarP(&o.conflictCode, "conflict-exit-code", "E", exitNotAcquired, "exit status when the lock is not acquired")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing when the lock is not acquired (for cron)")
	f.BoolVarP(&o.shared, "shared", "s", false, "take the lock in shared mode: shared holders run together, never with an exclusive one (flock -s)")
	f.IntVar(&o.limit, "limit", 0, "make NAME a semaphore of this many permits: up to N holders at once (consul lock -n)")
	addHoldFlags(f, &o)
	return c
}

// runLong is run's --help.
const runLong = `Run takes the lock NAME, runs COMMAND with DLOCK_NAME and DLOCK_FENCE in its
environment, and releases the lock when the command exits, exiting with the
command's status. The lease is renewed every TTL/3 while the command runs.
Flags go anywhere before "--"; without "--", before NAME (the words after
NAME are the command). Durations take bare seconds ("10") or Go durations
("1m30s").

By default the lock is exclusive. --shared (-s, as flock's -s) takes it
in shared mode: any number of shared holders run together, and none runs
while an exclusive holder does; an exclusive run that waits is not
overtaken by shared ones that come after it. --limit N (consul lock's -n;
-n here is --try, as in flock) makes NAME a semaphore of N permits: up to
N commands hold it at once. Every holder of a semaphore must give the same
N, and a name is either a lock (exclusive and shared holders) or a
semaphore: a run that disagrees with the current holders exits 65.

The command lives and dies with the lock:
  - If the lock is lost while it runs, its process group gets SIGTERM, then
    SIGKILL after --grace, and run exits 69.
  - If dlock is killed, even by SIGKILL, the kernel kills the command.
    Another run takes over once --ttl has run out, on every store; on
    ZooKeeper once the session times out, which dlock sets to --ttl (unless
    the zk:// URL has session_timeout) and the server bounds to 2 to 20
    tickTimes, 4 s to 40 s by default: a --ttl below 4 s gives 4 s there.
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

The lock's metadata, which anyone who can read the store sees ("dlock
status", "dlock observe", the line of a run that finds the lock held),
says host=HOST pid=PID; --record-command adds cmd=COMMAND ARGS..., with
the password of every URL in it shown as xxxxx (a password given any
other way is not hidden).

Exit status:
  the command's   the command ran (128+N if signal N killed it)
  75              not acquired: --try, or --wait elapsed (see --conflict-exit-code)
  65              NAME is held in another mode (exclusive or shared against a
                  semaphore, or a semaphore with another --limit)
  69              the lock was lost, or may have run out, while the command ran
  74              the store could not be reached (--connect-timeout) or failed
  77              the store denied access: wrong password or certificate, or a
                  missing grant, ACL or role (see the README's least-privilege
                  grants)
  73              the store refuses writes for lack of space (etcd's NOSPACE
                  alarm, Redis at maxmemory, a full disk): see the README
  64              usage error: bad flag, name, duration or store URL (nothing
                  contacted), or --shared or --limit on a store that has
                  neither (Redlock; no lock step sent)
  126, 127        the command could not be run, or was not found
  128+N           signal N arrived while waiting for the lock
When the command ends, the lock is released; if the store does not answer
within a second, dlock exits anyway and the lease ends by itself.`

// holdCommand is the RunE of run (lead false) and lead: it parses the
// arguments into o, then runs the command under the lock.
func holdCommand(o *runOptions, lead bool) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		name, argv, err := parseRunArgs(cmd, args, o)
		if errors.Is(err, pflag.ErrHelp) {
			return cmd.Help()
		}
		if err != nil {
			return err
		}
		r := &runner{name: name, o: *o, lead: lead}
		return r.main(cmd, argv)
	}
}

// addHoldFlags adds the flags run and lead share: how the lock is held
// and how the command is stopped, and what dlock says.
func addHoldFlags(f *pflag.FlagSet, o *runOptions) {
	// The defaults are set before the flags are declared: pflag shows
	// what a flag holds then as its default.
	o.ttl, o.grace = defaultTTL, defaultGrace
	f.Var(seconds{&o.ttl}, "ttl", "lease length, renewed every TTL/3 while the command runs; half the library's driver.DefaultTTL (30s), so that the lock of a job whose host died frees sooner")
	f.Var(seconds{&o.grace}, "grace", "after the lock is lost, time between SIGTERM and SIGKILL")
	f.Var(seconds{&o.lockDelay}, "lock-delay", "if dlock dies or loses the store while the command runs, nobody gets the lock until this long after its lease ran out (Consul's lock-delay), so that the command's last writes land or fail first; an exit of the command frees it at once (default 0: none; not on ZooKeeper)")
	f.BoolVar(&o.recordCommand, "record-command", false, "store the command line with the lock, for status, observe and conflict lines, with URLs' passwords hidden (default: host and pid only; anyone who can read the store sees it)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "say what happens: the store, waiting and for whom, acquisition with its fence, loss, release; and the library's own log of acquisitions, renewals, losses and releases (log/slog text lines)")
}

// defaultTTL is the lease of run and lead: half driver.DefaultTTL, since a
// shell job whose host dies should free its lock for the next run
// sooner, and a command-line holder renews from one process that does
// nothing else, so a short lease costs it little.
const defaultTTL = 15 * time.Second

// defaultGrace is the time between SIGTERM and SIGKILL after a loss.
const defaultGrace = 10 * time.Second

// parseRunArgs parses the arguments of run (and lead, which takes the
// same form): flags and NAME before "--", the command after it; without
// "--", flags before NAME and the command after NAME. Every check that
// needs no store is made here, so that a usage error contacts nothing.
func parseRunArgs(cmd *cobra.Command, args []string, o *runOptions) (string, []string, error) {
	cmd.InheritedFlags() // merges --store into cmd.Flags()
	f := cmd.Flags()
	sub := cmd.Name()
	usage := fmt.Sprintf("usage: dlock %s [flags] NAME -- COMMAND [ARGS...]", sub)
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
		return "", nil, usageError{fmt.Errorf("%s: %w", sub, err)}
	}
	if help, _ := f.GetBool("help"); help {
		return "", nil, pflag.ErrHelp
	}
	pos := f.Args()
	switch {
	case len(pos) == 0:
		return "", nil, usageError{fmt.Errorf("%s: no lock NAME given (%s)", sub, usage)}
	case dash < 0:
		argv = pos[1:]
	case len(pos) > 1:
		return "", nil, usageError{fmt.Errorf("%s: one NAME before \"--\", got %q", sub, pos)}
	}
	name := pos[0]
	if len(argv) == 0 {
		return "", nil, usageError{fmt.Errorf("%s: no COMMAND given after NAME %q (%s)", sub, name, usage)}
	}
	o.waitSet = f.Changed("wait")
	o.connectTimeout = connectTimeout(cmd) // --wait bounds it too: see runner.main
	if o.try && o.waitSet {
		return "", nil, usageError{fmt.Errorf("%s: --try and --wait exclude each other", sub)}
	}
	if o.waitSet && o.wait == 0 {
		o.try = true // flock's -w 0
	}
	switch {
	case o.wait < 0 || o.grace < 0:
		return "", nil, usageError{fmt.Errorf("%s: --wait and --grace must not be negative", sub)}
	case o.connectTimeout <= 0:
		return "", nil, usageError{fmt.Errorf("%s: --connect-timeout must be positive", sub)}
	case checkTTL(sub, o.ttl) != nil:
		return "", nil, checkTTL(sub, o.ttl)
	case o.conflictCode < 0 || o.conflictCode > 255:
		return "", nil, usageError{fmt.Errorf("%s: --conflict-exit-code %d is not an exit status (0-255)", sub, o.conflictCode)}
	case o.quiet && o.verbose:
		return "", nil, usageError{fmt.Errorf("%s: --quiet and --verbose exclude each other", sub)}
	case o.shared && f.Changed("limit"):
		return "", nil, usageError{fmt.Errorf("%s: --shared and --limit exclude each other (a name is a lock, exclusive or shared, or a semaphore)", sub)}
	case f.Changed("limit") && o.limit < 1:
		return "", nil, usageError{fmt.Errorf("%s: --limit %d: a semaphore has at least 1 permit", sub, o.limit)}
	}
	if err := driver.ValidateName(name); err != nil {
		return "", nil, badName(sub, name, err)
	}
	return name, argv, nil
}

// checkTTL is the usage error of subcommand sub for a --ttl outside
// [driver.MinTTL, driver.MaxTTL], or nil.
func checkTTL(sub string, ttl time.Duration) error {
	if ttl < driver.MinTTL || ttl > driver.MaxTTL {
		return usageError{fmt.Errorf("%s: --ttl %v out of range [%v, %v]", sub, ttl, driver.MinTTL, driver.MaxTTL)}
	}
	return nil
}
