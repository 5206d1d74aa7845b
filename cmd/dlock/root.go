package main

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // the database/sql driver of sqlite:// URLs

	_ "github.com/dlock-go/dlock/etcdlock"
	_ "github.com/dlock-go/dlock/kubelock"
	_ "github.com/dlock-go/dlock/memlock"
	_ "github.com/dlock-go/dlock/natslock"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/redlock"
	_ "github.com/dlock-go/dlock/sqllock"          // sqlite://
	_ "github.com/dlock-go/dlock/sqllock/mysql"    // mysql://
	_ "github.com/dlock-go/dlock/sqllock/postgres" // postgres://, postgresql://
	_ "github.com/dlock-go/dlock/zklock"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Run commands under distributed locks, and inspect locks",
		Long: `dlock runs commands under distributed locks held in Redis, PostgreSQL,
MySQL, SQLite, ZooKeeper or etcd, and inspects them.

The store is a URL: --store, else $DLOCK_STORE, else the default store,
` + describeDefaultStore() + `:
a SQLite file of this user on this machine, created on first use. Its locks
exclude only this user's processes on this host; use a shared store to
exclude across users or hosts. Store URLs:
  redis://[user:pass@]host:port[/db]      rediss://... (TLS)
  redis+sentinel://host:port[,host:port]/master-name
  redis+cluster://host:port[,host:port]
  redlock://host:port,host:port,host:port (Redlock: independent masters)
  mysql://user[:pass]@host:port/dbname
  postgres://user[:pass]@host:port/dbname postgres:///dbname?host=/run/postgresql
  sqlite:///absolute/path.db              mem:// (this process only)
  zk://[user:pass@]host:port[/root]       etcd://host:port[/prefix]  etcds://... (TLS)
TLS on any network store: ?tls=true, or ?tls_ca=FILE (server's CA),
&tls_cert=FILE&tls_key=FILE (client certificate), &tls_server_name=NAME.
A password may come from $DLOCK_PASSWORD instead of the URL; it is never
printed, and neither it nor a $DLOCK_STORE holding one reaches the commands
dlock runs.

Exit status: 64 usage error (nothing contacted; or --shared, --limit on a
store without them), 74 store unreachable,
77 store denied access (credentials, grants), 73 store out of
space, 75 lock not acquired, 69 lock lost while the command ran, 65 name held in
another mode (shared or exclusive against a semaphore, or another
--limit); see "dlock run --help".`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("dlock {{.Version}}\n")
	// --version without cobra's -v shorthand: -v is --verbose in run and
	// lead, as in ssh, curl and rsync, and means nothing else anywhere.
	root.Flags().Bool("version", false, "print dlock's version (module version, or commit) and its Go version")
	root.PersistentFlags().String("store", "", "store URL (default $DLOCK_STORE, else "+describeDefaultStore()+")")
	timeout := defaultConnectTimeout
	root.PersistentFlags().Var(seconds{&timeout}, "connect-timeout", "give up on a store that does not answer within this long (exit 74)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(), newLeadCmd(), newObserveCmd(), newStatusCmd(), newReleaseCmd(), newDemoCmd(), newDemoWorkerCmd())
	return root
}

// connectTimeout is the --connect-timeout of cmd.
func connectTimeout(cmd *cobra.Command) time.Duration {
	if f := cmd.Flags().Lookup("connect-timeout"); f != nil {
		if s, ok := f.Value.(seconds); ok {
			return *s.d
		}
	}
	return defaultConnectTimeout
}

// version is what --version prints after "dlock ": see versionOf.
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// versionOf describes the build bi (nil when the binary carries no build
// information): the module version go install records; else, for a
// build in a checkout, "(devel)" with the commit, its time and whether
// the tree was modified, where go build stamped them; then the Go
// version, always.
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "(devel) (" + runtime.Version() + ")"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v + " (" + bi.GoVersion + ")"
	}
	words := []string{"(devel)"}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		words = append(words, rev[:min(12, len(rev))])
	}
	if at := vcs["vcs.time"]; at != "" {
		words = append(words, at)
	}
	if vcs["vcs.modified"] == "true" {
		words = append(words, "modified")
	}
	return strings.Join(words, " ") + " (" + bi.GoVersion + ")"
}

// usageError marks errors in the command line.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageArgs marks the errors of an argument validator as usage errors,
// naming the command and giving its usage line: cobra's own message
// ("accepts 1 arg(s), received 2") names neither.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{fmt.Errorf("%s: %w (usage: %s)", cmd.Name(), err, cmd.UseLine())}
		}
		return nil
	}
}

func isUsageError(err error) bool {
	var u usageError
	// cobra's own error for an unknown subcommand is untyped.
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command")
}
