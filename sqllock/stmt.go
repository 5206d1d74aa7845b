package sqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// querier runs statements: a *sql.DB, or a Locker's stmtCache over one.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// stepDB runs the statements and transactions of a step: the Locker's
// stmtCache over its pool, or a *sql.Conn of the pool.
type stepDB interface {
	querier
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// maxStmts bounds the statements one Locker keeps prepared: the fixed
// steps, and refresh statements for the batch sizes seen first.
const maxStmts = 32

// stmtCache runs a Locker's statements as *sql.Stmt prepared once (and
// again by database/sql on each connection that needs them), so a step
// costs one round trip even with drivers that would otherwise prepare,
// execute and close every parameterized query (go-sql-driver/mysql).
type stmtCache struct {
	db *sql.DB

	mu     sync.Mutex
	closed bool
	stmts  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: make(map[string]*sql.Stmt)}
}

// stmt returns the prepared statement for query, or nil if the cache is
// full or closed.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	s, ok := c.stmts[query]
	full := c.closed || len(c.stmts) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok || c.closed {
		s.Close() // lost a race with another caller, or with close
		return prev, nil
	}
	c.stmts[query] = s
	return s, nil
}

func (c *stmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := c.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case s == nil:
		return c.db.ExecContext(ctx, query, args...)
	}
	return s.ExecContext(ctx, args...)
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := c.stmt(ctx, query)
	switch {
	case err != nil:
		return nil, err
	case s == nil:
		return c.db.QueryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

// BeginTx begins a transaction on the pool.
func (c *stmtCache) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return c.db.BeginTx(ctx, opts)
}

// close closes every prepared statement; later calls run unprepared.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, s := range c.stmts {
		errs = append(errs, s.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}

// queryRow runs query with args and scans its first row into dest. It
// returns sql.ErrNoRows if there is none.
func queryRow(ctx context.Context, db querier, query string, args []any, dest ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}
