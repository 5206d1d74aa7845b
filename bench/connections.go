package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Issue 28: the SQL servers' own connection counters around a run, and
// the connections the clients saw refused.

// Metrics of the servers' connection counters.
const (
	mConnPeak   = "conn_peak"    // most client connections seen at once (sampled every 50 ms)
	mConnMax    = "conn_max"     // MariaDB Max_used_connections since the run's FLUSH STATUS
	mRefusedSrv = "refused_srv"  // MariaDB Connection_errors_max_connections, delta
	mAborted    = "aborted"      // MariaDB Aborted_connects, delta: failed connection attempts of any cause
	mRefusedCli = "refused_cli"  // clients' errors saying the server had too many connections
	mConnLimit  = "conn_limit"   // the server's max_connections
	mAcqs       = "acquisitions" // acquisitions in a run
)

// connAdmin reads a SQL server's connection counters over one connection
// of its own (counted in them: the figures include it).
type connAdmin struct {
	name string // "MariaDB" or "Postgres"
	db   *sql.DB
}

// openConnAdmin returns st's connection reader, or nil for a store
// without one (only MariaDB and PostgreSQL have a server of connections).
func openConnAdmin(st store) (*connAdmin, error) {
	var drv string
	switch st.name {
	case "MariaDB":
		drv = "mysql"
	case "Postgres":
		drv = "pgx"
	default:
		return nil, nil
	}
	db, err := sql.Open(drv, st.adminDSN)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &connAdmin{name: st.name, db: db}, nil
}

// connCounts are a server's counters at one moment.
type connCounts struct {
	connected int64 // MariaDB Threads_connected; PostgreSQL client backends in pg_stat_activity
	maxUsed   int64 // MariaDB Max_used_connections; PostgreSQL: none (-1)
	refused   int64 // MariaDB Connection_errors_max_connections; PostgreSQL: none (-1)
	aborted   int64 // MariaDB Aborted_connects; PostgreSQL: none (-1)
	limit     int64 // max_connections
}

func (a *connAdmin) read(ctx context.Context) (connCounts, error) {
	if a.name == "Postgres" {
		c := connCounts{maxUsed: -1, refused: -1, aborted: -1}
		err := a.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
	current_setting('max_connections')::bigint`).Scan(&c.connected, &c.limit)
		return c, err
	}
	rows, err := a.db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN
	('Threads_connected', 'Max_used_connections', 'Connection_errors_max_connections', 'Aborted_connects')`)
	if err != nil {
		return connCounts{}, err
	}
	defer rows.Close()
	var c connCounts
	for rows.Next() {
		var (
			name string
			v    int64
		)
		if err := rows.Scan(&name, &v); err != nil {
			return connCounts{}, err
		}
		switch name {
		case "Threads_connected":
			c.connected = v
		case "Max_used_connections":
			c.maxUsed = v
		case "Connection_errors_max_connections":
			c.refused = v
		case "Aborted_connects":
			c.aborted = v
		}
	}
	if err := rows.Err(); err != nil {
		return connCounts{}, err
	}
	return c, a.db.QueryRowContext(ctx, `SELECT @@max_connections`).Scan(&c.limit)
}

// connWatch follows a server's connections through one run.
type connWatch struct {
	a      *connAdmin
	before connCounts
	peak   int64
	stop   context.CancelFunc
	done   sync.WaitGroup
	err    error
}

// watchConns resets MariaDB's high-water mark (FLUSH STATUS), reads the
// counters and samples the connections every 50 ms until end is called.
// A nil admin watches nothing.
func watchConns(a *connAdmin) *connWatch {
	w := &connWatch{a: a}
	if a == nil {
		return w
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	if a.name == "MariaDB" {
		_, w.err = a.db.ExecContext(ctx, "FLUSH STATUS")
	}
	if w.err == nil {
		w.before, w.err = a.read(ctx)
	}
	w.done.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if c, err := a.read(ctx); err == nil {
				w.peak = max(w.peak, c.connected)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return w
}

// end stops the sampling and adds the run's figures under key k: the
// peak, MariaDB's high-water mark, refusals for lack of connections and
// aborted connection attempts the server counted, and the limit.
func (w *connWatch) end(fg figures, k string) error {
	if w.a == nil {
		return nil
	}
	w.stop()
	w.done.Wait()
	after, err := w.a.read(context.Background())
	if err = errors.Join(w.err, err); err != nil {
		return fmt.Errorf("%s connection counters: %w", w.a.name, err)
	}
	fg.add(k, mConnPeak, float64(max(w.peak, after.connected)))
	fg.add(k, mConnLimit, float64(after.limit))
	if after.maxUsed >= 0 {
		fg.add(k, mConnMax, float64(after.maxUsed))
		fg.add(k, mRefusedSrv, float64(after.refused-w.before.refused))
		fg.add(k, mAborted, float64(after.aborted-w.before.aborted))
	}
	return nil
}

// refusedErrors counts the errors of halves that say the server refused
// a connection for lack of slots: MySQL's 1040 "Too many connections",
// PostgreSQL's SQLSTATE 53300 "too many clients" (which PostgreSQL
// counts nowhere).
func refusedErrors(halves []hotHalf) int {
	n := 0
	for _, h := range halves {
		for _, e := range h.Errors {
			if strings.Contains(e, "Too many connections") || strings.Contains(e, "1040") ||
				strings.Contains(e, "too many clients") || strings.Contains(e, "53300") {
				n++
			}
		}
	}
	return n
}
