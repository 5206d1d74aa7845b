package sqllock_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
)

// countedDB opens, on the database that db (opened with dsn) reaches, a
// pool that counts the statements, prepares, begins, commits and
// rollbacks its connections send: the client's round trips, on any
// driver. It is closed when the test ends.
func countedDB(t *testing.T, db *sql.DB, dsn string) (*sql.DB, *atomic.Int64) {
	t.Helper()
	var inner sqldriver.Connector = dsnConnector{db.Driver(), dsn}
	if dc, ok := db.Driver().(sqldriver.DriverContext); ok {
		c, err := dc.OpenConnector(dsn)
		if err != nil {
			t.Fatalf("OpenConnector(%s) = %v", dsn, err)
		}
		inner = c
	}
	n := new(atomic.Int64)
	counted := sql.OpenDB(countingConnector{inner, n})
	t.Cleanup(func() { counted.Close() })
	return counted, n
}

// dsnConnector is the Connector of a driver without one of its own.
type dsnConnector struct {
	drv sqldriver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (sqldriver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() sqldriver.Driver                        { return c.drv }

type countingConnector struct {
	inner sqldriver.Connector
	n     *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{conn, c.n}, nil
}

func (c countingConnector) Driver() sqldriver.Driver { return c.inner.Driver() }

// countingConn counts what reaches the server through conn: a call the
// driver answers with ErrSkip (database/sql then prepares) is not one.
type countingConn struct {
	conn sqldriver.Conn
	n    *atomic.Int64
}

// count adds one round trip unless err is ErrSkip, and returns err.
func (c *countingConn) count(err error) error {
	if !errors.Is(err, sqldriver.ErrSkip) {
		c.n.Add(1)
	}
	return err
}

func (c *countingConn) Prepare(query string) (sqldriver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	var (
		s   sqldriver.Stmt
		err error
	)
	if p, ok := c.conn.(sqldriver.ConnPrepareContext); ok {
		s, err = p.PrepareContext(ctx, query)
	} else {
		s, err = c.conn.Prepare(query)
	}
	if c.count(err) != nil {
		return nil, err
	}
	return &countingStmt{s, c.n}, nil
}

func (c *countingConn) Close() error { return c.conn.Close() }

func (c *countingConn) Begin() (sqldriver.Tx, error) {
	return c.BeginTx(context.Background(), sqldriver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	b, ok := c.conn.(sqldriver.ConnBeginTx)
	if !ok {
		return nil, errors.New("countingConn: driver without BeginTx")
	}
	tx, err := b.BeginTx(ctx, opts)
	if c.count(err) != nil {
		return nil, err
	}
	return countingTx{tx, c.n}, nil
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	e, ok := c.conn.(sqldriver.ExecerContext)
	if !ok {
		return nil, sqldriver.ErrSkip
	}
	r, err := e.ExecContext(ctx, query, args)
	return r, c.count(err)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	q, ok := c.conn.(sqldriver.QueryerContext)
	if !ok {
		return nil, sqldriver.ErrSkip
	}
	r, err := q.QueryContext(ctx, query, args)
	return r, c.count(err)
}

func (c *countingConn) CheckNamedValue(v *sqldriver.NamedValue) error {
	if nc, ok := c.conn.(sqldriver.NamedValueChecker); ok {
		return nc.CheckNamedValue(v)
	}
	return sqldriver.ErrSkip
}

func (c *countingConn) Ping(ctx context.Context) error {
	if p, ok := c.conn.(sqldriver.Pinger); ok {
		return c.count(p.Ping(ctx))
	}
	return nil
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.conn.(sqldriver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	if v, ok := c.conn.(sqldriver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type countingTx struct {
	tx sqldriver.Tx
	n  *atomic.Int64
}

func (t countingTx) Commit() error   { t.n.Add(1); return t.tx.Commit() }
func (t countingTx) Rollback() error { t.n.Add(1); return t.tx.Rollback() }

type countingStmt struct {
	s sqldriver.Stmt
	n *atomic.Int64
}

func (s *countingStmt) Close() error  { return s.s.Close() }
func (s *countingStmt) NumInput() int { return s.s.NumInput() }

func (s *countingStmt) Exec(args []sqldriver.Value) (sqldriver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *countingStmt) Query(args []sqldriver.Value) (sqldriver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

// named numbers args as database/sql does.
func named(args []sqldriver.Value) []sqldriver.NamedValue {
	nv := make([]sqldriver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = sqldriver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

func (s *countingStmt) ExecContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	s.n.Add(1)
	if e, ok := s.s.(sqldriver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return nil, errors.New("countingStmt: driver without ExecContext")
}

func (s *countingStmt) QueryContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	s.n.Add(1)
	if q, ok := s.s.(sqldriver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return nil, errors.New("countingStmt: driver without QueryContext")
}
