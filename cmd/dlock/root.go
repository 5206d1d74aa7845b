package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/go-sql-driver/mysql" // database/sql drivers for sqllock's URLs
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/spf13/cobra"
	_ "modernc.org/sqlite"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	_ "github.com/dlock-go/dlock/etcdlock"
	_ "github.com/dlock-go/dlock/memlock"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/zklock"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Run commands under distributed locks, and inspect locks",
		Long: `dlock runs commands under distributed locks held in Redis, PostgreSQL,
MySQL, SQLite, ZooKeeper or etcd, and inspects them.

The store is a URL: --store, else $DLOCK_STORE, else a SQLite file in the
user's state directory. Store URLs:
  redis://[user:pass@]host:port[/db]      rediss://... (TLS)
  redis+sentinel://host:port[,host:port]/master-name
  redis+cluster://host:port[,host:port]
  mysql://user[:pass]@host:port/dbname    postgres://user[:pass]@host:port/dbname
  sqlite:///absolute/path.db              mem:// (this process only)
  zk://host:port[,host:port][/root]       etcd://host:port[,host:port][/prefix]
A password may also come from $DLOCK_PASSWORD.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("store", "", "store URL (default $DLOCK_STORE, else "+displayDefaultStore()+")")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(), newStatusCmd(), newReleaseCmd(), newDemoCmd(), newDemoWorkerCmd())
	return root
}

// usageError marks errors in the command line.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usageArgs marks the errors of an argument validator as usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func isUsageError(err error) bool {
	var u usageError
	// cobra's own error for an unknown subcommand is untyped.
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command")
}

// storeURL returns the store the user chose, or the default.
func storeURL(cmd *cobra.Command) (string, error) {
	if s, _ := cmd.Flags().GetString("store"); s != "" {
		return s, nil
	}
	if s := os.Getenv("DLOCK_STORE"); s != "" {
		return s, nil
	}
	return defaultStore()
}

// openStore opens the chosen store. Errors never show a password.
func openStore(ctx context.Context, cmd *cobra.Command) (*dlock.Locker, string, error) {
	u, err := storeURL(cmd)
	if err != nil {
		return nil, "", err
	}
	l, err := dlock.Open(ctx, u)
	if err != nil {
		return nil, "", err
	}
	return l, backend.RedactURL(u), nil
}

// defaultStore is a SQLite file in the user's state directory
// ($XDG_STATE_HOME/dlock/locks.db, else ~/.local/state/dlock/locks.db),
// created on first use.
func defaultStore() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --store, no $DLOCK_STORE, and no home directory for the default store: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "dlock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create the default store's directory: %w", err)
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(dir, "locks.db")), nil
}

func displayDefaultStore() string {
	return "sqlite://$XDG_STATE_HOME/dlock/locks.db"
}
