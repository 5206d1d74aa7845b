package sqllock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/sqllock/internal/dialects"
)

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
