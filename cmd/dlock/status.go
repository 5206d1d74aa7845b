package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

func newStatusCmd() *cobra.Command {
	var (
		asJSON, watch bool
		interval      = defaultWatchInterval
	)
	c := &cobra.Command{
		Use:   "status [flags] [NAME...]",
		Short: "Show who holds locks",
		Long: `Status shows, for each NAME (or every held lock when none is given), sorted
by name, its fencing token, the lease left on the server ("unknown" where
the store cannot tell), the holder's owner id, its MODE and what it said
about itself (dlock run: host and pid, and the command with
--record-command), its control characters escaped (\x1b, \n). A name with several holders (shared
holds, semaphore permits) has one row per holder, oldest (lowest fence)
first. MODE is "exclusive", "shared", or "permit H/N" for a semaphore of N
permits of which H are held. It only reads: it creates no table and no
file (SQL store URLs get migrate=false).

--watch shows the table again every --interval (default 1s), with a
WAITERS column: how many acquisitions the store queues for the name
(Redis, ZooKeeper, etcd), or "-" where it cannot tell. Named locks are
also observed, so that a holder coming or going shows at once where the
store pushes changes. On a terminal each table replaces the last;
otherwise each follows the last after a blank line, under a line with the
time. Ctrl-C (or SIGTERM, SIGHUP, SIGQUIT) ends it with status 0; a store
that fails or does not answer within --connect-timeout, with 74.`,
		Example: `  dlock status --store redis://redis:6379
  dlock status --watch --store redis://redis:6379 nightly-report`,
		RunE: func(cmd *cobra.Command, names []string) error {
			for _, n := range names {
				if err := driver.ValidateName(n); err != nil {
					return badName("status", n, err)
				}
			}
			if watch && asJSON {
				return usageError{errors.New("status: --watch and --json exclude each other")}
			}
			if interval <= 0 {
				return usageError{errors.New("status: --interval must be positive")}
			}
			timeout := connectTimeout(cmd)
			if watch && timeout <= 0 {
				return usageError{errors.New("status: --connect-timeout must be positive")}
			}
			s, err := chooseStore(cmd)
			if err != nil {
				return err
			}
			if watch {
				return watchStatus(cmd.OutOrStdout(), s, names, timeout, interval)
			}
			infos, err := inspect(cmd, s, names)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printStatusJSON(out, infos, names)
			}
			return printStatus(out, s.shown, infos, names, nil)
		},
	}
	c.Flags().BoolVar(&watch, "watch", false, "show the table again every --interval, with waiters, until Ctrl-C")
	c.Flags().Var(seconds{&interval}, "interval", "with --watch, how often to read the locks again")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: a list of {name, held, fence, remaining_ms, owner, metadata, shared, limit}, one per holder, every field always present (remaining_ms null when unknown; limit 0 unless a semaphore)")
	return c
}

// printStatus prints status's table of the holders infos and the free
// names among names (or that no lock is held, when names is empty); with
// waiters not nil, a WAITERS column shows waiters[name].
func printStatus(out io.Writer, shown string, infos []dlock.LockInfo, names []string, waiters map[string]string) error {
	if len(infos) == 0 && len(names) == 0 {
		_, err := fmt.Fprintf(out, "no locks held on %s\n", shown)
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(cols []string, waiting, holder string) {
		if waiters != nil {
			cols = append(cols, waiting)
		}
		fmt.Fprintln(w, strings.Join(append(cols, holder), "\t"))
	}
	row([]string{"NAME", "FENCE", "LEASE LEFT", "OWNER", "MODE"}, "WAITERS", "HOLDER")
	for _, e := range statusEntries(infos, names) {
		cols := []string{strconv.Quote(e.Name), "-", "-", "(free)", "-"}
		if e.Held {
			left := "unknown"
			if e.RemainingMS != nil {
				left = (time.Duration(*e.RemainingMS) * time.Millisecond).String()
			}
			cols = []string{strconv.Quote(e.Name), strconv.FormatUint(e.Fence, 10), left, printable(e.Owner), e.mode}
		}
		row(cols, waiters[e.Name], printable(e.Metadata))
	}
	return w.Flush()
}

// inspect asks the store about names, reading only: a SQLite file (the
// default store or another) that does not exist yet holds no locks, and
// SQL stores are opened with migrate=false so that no table is created.
func inspect(cmd *cobra.Command, s store, names []string) ([]dlock.LockInfo, error) {
	if noFile(s) {
		return nil, nil
	}
	s.url = readOnly(s.url)
	l, err := connect(cmd.Context(), s, connectTimeout(cmd))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	infos, err := l.Inspect(cmd.Context(), names...)
	if err != nil {
		return nil, storeFailed(s, err)
	}
	return infos, nil
}

// noFile reports whether s is a SQLite file (the default store or
// another) that does not exist: it holds no locks, and opening it would
// create it.
func noFile(s store) bool {
	path := s.path
	if u, err := url.Parse(s.url); !s.isDefault && err == nil && u.Scheme == "sqlite" {
		path = u.Path
	}
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return errors.Is(err, os.ErrNotExist)
}

// readOnly adds migrate=false to a SQL store's URL unless it has a
// migrate parameter already.
func readOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	switch u.Scheme {
	case "sqlite", "mysql", "postgres", "postgresql":
	default:
		return raw
	}
	q := u.Query()
	if q.Has("migrate") {
		return raw
	}
	q.Set("migrate", "false")
	u.RawQuery = q.Encode()
	return u.String()
}

// statusEntry is one line of status, and one element of its JSON.
type statusEntry struct {
	Name        string `json:"name"`
	Held        bool   `json:"held"`
	Fence       uint64 `json:"fence,string"`
	RemainingMS *int64 `json:"remaining_ms"` // nil: free, or the store cannot tell
	Owner       string `json:"owner"`
	Metadata    string `json:"metadata"`
	Shared      bool   `json:"shared"`  // a shared hold
	Limit       int    `json:"limit"`   // a semaphore's permits; 0 for a lock
	Delayed     bool   `json:"delayed"` // the holder's lease ran out; the name is in its lock-delay
	mode        string // MODE: exclusive, shared, or permit H/N
}

// statusEntries lists the holders, then the names asked about that are
// free, all sorted by name, and a name's holders by fence.
func statusEntries(infos []dlock.LockInfo, names []string) []statusEntry {
	list := []statusEntry{}
	held := map[string]int{} // holders of each name
	for _, i := range infos {
		held[i.Name]++
	}
	for _, i := range infos {
		e := statusEntry{Name: i.Name, Held: true, Fence: i.Fence, Owner: i.Owner, Metadata: i.Metadata,
			Shared: i.Shared, Limit: i.Limit, Delayed: i.Delayed, mode: mode(i, held[i.Name])}
		if i.Delayed {
			e.mode += " (lock-delay)"
		}
		if i.Remaining > 0 {
			ms := i.Remaining.Milliseconds()
			e.RemainingMS = &ms
		}
		list = append(list, e)
	}
	for _, n := range names {
		if held[n] == 0 {
			held[n] = -1 // listed once
			list = append(list, statusEntry{Name: n})
		}
	}
	slices.SortFunc(list, func(a, b statusEntry) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Fence, b.Fence))
	})
	return list
}

// mode is the MODE of holder i of a name that has holders in all.
func mode(i dlock.LockInfo, holders int) string {
	switch {
	case i.Limit > 0:
		return fmt.Sprintf("permit %d/%d", holders, i.Limit)
	case i.Shared:
		return "shared"
	}
	return "exclusive"
}

func printStatusJSON(out io.Writer, infos []dlock.LockInfo, names []string) error {
	return writeJSON(out, statusEntries(infos, names), true)
}
