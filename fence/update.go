package fence

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/sqllock"
)

// DB is what Update.Exec runs on: *sql.DB, *sql.Tx and *sql.Conn
// implement it, so a fenced update can be part of the caller's own
// transaction.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Column is a column of the user's table and the value bound to it.
type Column struct {
	Name  string // a plain identifier, written into the statement unquoted
	Value any    // bound as a parameter, never written into the statement
}

// Update is a fenced UPDATE of the user's own table, for data that lives
// in its own rows rather than in a Table. The table keeps each row's
// token in a BIGINT column (Fence); add one to an existing table with
//
//	ALTER TABLE accounts ADD COLUMN fence BIGINT NOT NULL DEFAULT 0
//
// (a NULL fence counts as 0). For
//
//	Update{Dialect: sqllock.PostgreSQL, Table: "accounts",
//		Set: []fence.Column{{"balance", 90}}, Where: []fence.Column{{"id", 7}}}
//
// Exec runs, with token t,
//
//	UPDATE accounts SET balance = $1, fence = $2
//	WHERE id = $3 AND COALESCE(fence, 0) <= $2
//
// (MySQL and SQLite: ? placeholders, the token bound twice). Where should
// name the row's key: each matched row is fenced on its own, so a Where
// that matches several rows updates those whose token is not above t.
type Update struct {
	Dialect sqllock.Dialect // the SQL the database speaks
	Table   string          // the table: a plain identifier, optionally schema.table
	Fence   string          // the fence column: a plain identifier. Default: "fence"
	Set     []Column        // the columns to set besides the fence; may be empty
	Where   []Column        // the row: each column equals its value; at least one
}

// column is a plain SQL identifier.
var column = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Exec runs the update with token on db, in one statement. If the row
// holds a higher token, nothing is changed and the error wraps ErrStale;
// if no row matches Where, it wraps sql.ErrNoRows. Bad identifiers, an
// empty Where or an unknown Dialect are refused with an error wrapping
// dlock.ErrInvalid before anything is sent.
//
// When the update changes no row, Exec reads the matched rows' highest
// token to tell the cases apart: MySQL also reports no row changed when
// the new values equal the stored ones, which is a write accepted.
func (u Update) Exec(ctx context.Context, db DB, token uint64) error {
	if err := checkToken(token); err != nil {
		return err
	}
	update, check, args, err := u.build(token)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, update, args...)
	if err != nil {
		return fmt.Errorf("fence: update %s: %w", u.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: update %s: %w", u.Table, err)
	}
	if n > 0 {
		return nil
	}
	var (
		rows   int64
		stored int64
	)
	if err := db.QueryRowContext(ctx, check, args[len(u.Set)+1:len(u.Set)+1+len(u.Where)]...).Scan(&rows, &stored); err != nil {
		return fmt.Errorf("fence: update %s: read its fence: %w", u.Table, err)
	}
	switch {
	case rows == 0:
		return fmt.Errorf("fence: update %s: no row matches: %w", u.Table, sql.ErrNoRows)
	case uint64(stored) > token:
		return fmt.Errorf("fence: update %s: token %d is below %d: %w", u.Table, token, stored, ErrStale)
	case uint64(stored) == token:
		return nil // MySQL: the row already held these values, written with this token
	}
	return fmt.Errorf("fence: update %s: no row updated, and its fence %d is below token %d: changed concurrently", u.Table, stored, token)
}

// build returns the UPDATE, the SELECT of the matched rows' count and
// highest token, and the UPDATE's arguments: the Set values, the token,
// the Where values and (with ? placeholders) the token again. The SELECT
// takes the Where values alone.
func (u Update) build(token uint64) (update, check string, args []any, err error) {
	invalid := func(what, name string) (string, string, []any, error) {
		return "", "", nil, fmt.Errorf("fence: update: %s %q is not a plain identifier: %w", what, name, dlock.ErrInvalid)
	}
	if !identifier.MatchString(u.Table) {
		return invalid("table", u.Table)
	}
	fence := u.Fence
	if fence == "" {
		fence = "fence"
	}
	if !column.MatchString(fence) {
		return invalid("fence column", fence)
	}
	if len(u.Where) == 0 {
		return "", "", nil, fmt.Errorf("fence: update %s: empty Where would update every row: %w", u.Table, dlock.ErrInvalid)
	}
	var dollar bool
	switch u.Dialect {
	case sqllock.PostgreSQL:
		dollar = true
	case sqllock.MySQL, sqllock.SQLite:
	default:
		return "", "", nil, fmt.Errorf("fence: update %s: unknown SQL dialect %d: %w", u.Table, u.Dialect, dlock.ErrInvalid)
	}
	n := 0
	param := func() string {
		n++
		if dollar {
			return "$" + strconv.Itoa(n)
		}
		return "?"
	}
	var set, where []string
	for _, c := range u.Set {
		if !column.MatchString(c.Name) || c.Name == fence {
			return invalid("Set column", c.Name)
		}
		set = append(set, c.Name+" = "+param())
		args = append(args, c.Value)
	}
	tokenParam := param()
	set = append(set, fence+" = "+tokenParam)
	args = append(args, int64(token))
	for _, c := range u.Where {
		if !column.MatchString(c.Name) {
			return invalid("Where column", c.Name)
		}
		where = append(where, c.Name+" = "+param())
		args = append(args, c.Value)
	}
	if !dollar {
		tokenParam = param()
		args = append(args, int64(token))
	}
	update = "UPDATE " + u.Table + " SET " + strings.Join(set, ", ") +
		" WHERE " + strings.Join(where, " AND ") + " AND COALESCE(" + fence + ", 0) <= " + tokenParam
	// The check's placeholders count from 1 again.
	n = 0
	where = where[:0]
	for _, c := range u.Where {
		where = append(where, c.Name+" = "+param())
	}
	check = "SELECT COUNT(*), COALESCE(MAX(COALESCE(" + fence + ", 0)), 0) FROM " + u.Table +
		" WHERE " + strings.Join(where, " AND ")
	return update, check, args, nil
}
