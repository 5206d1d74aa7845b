package jepsen

import (
	"database/sql/driver"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
)

// useSQLiteClock puts SQLite's julianday('now'), the store clock of
// sqllock's SQLite leases, in this process on the clock of a
// testserver.Clock: the host's plus the offset in the Clock's file (see
// testserver.Clock.File), which the runner steps. SQLite's clock is the
// host's, read by each worker process itself; Go reads it through the
// vDSO, past the LD_PRELOAD library that steps the C servers' clocks, and
// stepping the host's clock would disturb every other process on it. So
// each worker overrides SQLite's julianday with one argument (an
// application-defined function takes precedence over the built-in) for
// every connection it opens from now on: every worker then sees one clock,
// stepped at once, as they would see the host's. Only 'now' is accepted:
// sqllock asks for nothing else.
func useSQLiteClock(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("sqlite clock: %w", err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("sqlite clock: mmap %s: %w", file, err)
	}
	off := (*int64)(unsafe.Pointer(&mem[0])) // mapped for the process's life
	return sqlite.RegisterScalarFunction("julianday", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		if s, ok := args[0].(string); !ok || s != "now" {
			return nil, fmt.Errorf("julianday(%v): the jepsen clock knows only 'now'", args[0])
		}
		t := time.Now().Add(time.Duration(atomic.LoadInt64(off)))
		return float64(t.UnixNano())/float64(24*time.Hour) + 2440587.5, nil
	})
}
