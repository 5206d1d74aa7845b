package main

import "github.com/spf13/cobra"

func newLeadCmd() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "lead [flags] NAME [--] COMMAND [ARGS...]",
		Short: "Run a command while this process leads, and again each time it leads again",
		Long: `Lead campaigns for the leadership of NAME: it waits for the lock NAME, as
run does, then runs COMMAND while it holds it, with DLOCK_NAME and
DLOCK_FENCE in its environment. Of all the "dlock lead" processes on one
name, one at a time runs its command.

If leadership is lost (the lease could not be renewed, or "dlock release
--force"), the command is stopped exactly as run stops it (SIGTERM, then
SIGKILL after --grace), and lead campaigns again; when it leads again, it
starts the command again, with a new, higher DLOCK_FENCE. When the command
exits by itself, lead releases the lock and exits with its status: a
command that should run forever is restarted by whatever supervises lead
(systemd, Kubernetes), not by lead. SIGINT, SIGTERM and the other signals
run passes on go to the command, which decides when to exit; while lead
campaigns, the first of SIGINT, SIGTERM, SIGHUP and SIGQUIT ends it
(128+N). Everything run guarantees holds for each term: kill -9 of dlock
kills the command, Ctrl-Z stops both, a lease that may have run out while
dlock was stopped kills the command (and lead campaigns again).
If dlock's host dies or dlock is killed, another lead takes over once --ttl
has run out, on every store; on ZooKeeper once the session times out,
which dlock sets to --ttl (unless the zk:// URL has session_timeout) and
the server bounds to 2 to 20 tickTimes, 4 s to 40 s by default.

On stderr, lead says when it becomes leader and when it lost leadership
(not with --quiet).

This is etcd's concurrency.Election, Curator's LeaderSelector or
client-go's leaderelection for any command; with one-shot jobs, prefer
"dlock run", which exits when it cannot lead.

Exit status:
  the command's   the command exited by itself (128+N if signal N killed it)
  74              the store could not be reached at the start (--connect-timeout);
                  once connected, a store that fails while lead campaigns is
                  asked again after a pause (1 s, doubling up to 15 s)
  77              the store denied access (credentials, grants): lead stops,
                  since asking again would not help
  73              the store refuses writes for lack of space (etcd's NOSPACE
                  alarm, Redis at maxmemory, a full disk): lead stops
  65              NAME is held in another mode (a semaphore: see "dlock run")
  64              usage error: bad flag, name, duration or store URL; nothing contacted
  126, 127        the command could not be run, or was not found
  128+N           signal N arrived while campaigning`,
		Example: `  dlock lead --store etcd://etcd:2379 scheduler -- ./scheduler --serve
  dlock lead --ttl 10 --grace 5 --store redis://redis:6379 compactor -- ./compact-loop.sh`,
		DisableFlagParsing: true, // flags go anywhere before "--", as for run
		RunE:               holdCommand(&o, true),
	}
	f := c.Flags()
	f.BoolVarP(&o.quiet, "quiet", "q", false, "do not say when leadership is won or lost")
	addHoldFlags(f, &o)
	return c
}
