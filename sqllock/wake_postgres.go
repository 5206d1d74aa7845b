package sqllock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

// PostgreSQL wake-ups: a release NOTIFYs the table's channel with the
// name, in the statement (or transaction) that frees the row, and each
// Locker LISTENs on one connection of its own, opened on its first wait,
// and wakes its waiters of the names notified. A wake-up is a hint, never
// proof: the table stays the only source of truth, and a lost
// notification (the LISTEN connection broken, which wakes every waiter
// once it is back) costs a waiter latency, up to
// Options.MaxRetryInterval, never safety. The listener lives in package
// sqllock/postgres (postgres/listen.go), beside the pgx driver it needs.

// pgDriver adds LISTEN/NOTIFY wake-ups, which package sqllock/postgres
// makes (see dialects.Dialect.Listen), to the PostgreSQL driver.
type pgDriver struct {
	*sqlDriver
	lis dialects.Listener
}

func (d *pgDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w, stop, err := d.lis.Watch(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("sqllock: watch %q: %w", name, err)
	}
	return w, stop, nil
}

func (d *pgDriver) Close() error {
	d.lis.Close()
	return d.sqlDriver.Close()
}

var (
	_ driver.Driver   = (*pgDriver)(nil)
	_ driver.Notifier = (*pgDriver)(nil)
)
