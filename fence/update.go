package fence

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule"
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

// Placeholder is how a database's driver marks a statement's parameters.
// The zero Placeholder is none: Update refuses it.
type Placeholder int

const (
	// Question marks every parameter ?, as MySQL, MariaDB and SQLite do.
	Question Placeholder = iota + 1
	// Dollar numbers the parameters $1, $2, ..., as PostgreSQL does.
	Dollar
)

// Update is a fenced UPDATE of the user's own table, for data that lives
// in its own rows rather than in a store of fenced values such as
// sqllock.FenceTable. The table keeps each row's token in a BIGINT column
// (Fence); add one to an existing table with
//
//	ALTER TABLE accounts ADD COLUMN fence BIGINT NOT NULL DEFAULT 0
//
// (a NULL fence counts as 0). For
//
//	fence.Update{Placeholder: fence.Dollar, Table: "accounts",
//		Set:   []fence.Column{{Name: "balance", Value: 90}},
//		Where: []fence.Column{{Name: "id", Value: 7}}}
//
// Exec runs, with token t,
//
//	UPDATE accounts SET balance = $1, fence = $2
//	WHERE id = $3 AND COALESCE(fence, 0) <= $2
//
// (with Question placeholders, for MySQL and SQLite: ? throughout, the
// token bound twice). Where should name the row's key: each matched row is
// fenced on its own, so a Where that matches several rows updates those
// whose token is not above t. Update needs only package database/sql: it
// works on any database that runs this statement, whatever lock hands out
// the tokens.
type Update struct {
	Placeholder Placeholder // how the database marks parameters: Dollar for PostgreSQL, Question for MySQL, MariaDB and SQLite
	Table       string      // the table: a plain identifier, optionally schema.table
	Fence       string      // the fence column: a plain identifier. Default: "fence"
	Set         []Column    // the columns to set besides the fence; may be empty
	Where       []Column    // the row: each column equals its value; at least one
}

// Exec runs the update with token on db, in one statement. If the row
// holds a higher token, nothing is changed and the error wraps ErrStale;
// if no row matches Where, it wraps sql.ErrNoRows. Bad identifiers, an
// empty Where or an unknown Placeholder are refused with an error wrapping
// dlock.ErrInvalid before anything is sent.
//
// When the update changes no row, Exec reads the matched rows' highest
// token to tell the cases apart: MySQL also reports no row changed when
// the new values equal the stored ones, which is a write accepted.
func (u Update) Exec(ctx context.Context, db DB, token uint64) error {
	if err := fencerule.CheckToken(prefix, token); err != nil {
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

// params hands out a statement's parameter markers in order.
type params struct {
	dollar bool
	n      int
}

// next returns the next parameter's marker.
func (p *params) next() string {
	p.n++
	if p.dollar {
		return "$" + strconv.Itoa(p.n)
	}
	return "?"
}

// validate checks everything but the token, and returns the fence column
// and whether parameters are numbered.
func (u Update) validate() (fence string, dollar bool, err error) {
	invalid := func(what, name string) error {
		return fmt.Errorf("fence: update: %s %q is not a plain identifier: %w", what, name, dlock.ErrInvalid)
	}
	if !fencerule.PlainName(u.Table, true) {
		return "", false, invalid("table", u.Table)
	}
	fence = u.Fence
	if fence == "" {
		fence = "fence"
	}
	if !fencerule.PlainName(fence, false) {
		return "", false, invalid("fence column", fence)
	}
	if len(u.Where) == 0 {
		return "", false, fmt.Errorf("fence: update %s: empty Where would update every row: %w", u.Table, dlock.ErrInvalid)
	}
	for _, c := range u.Set {
		if !fencerule.PlainName(c.Name, false) || c.Name == fence {
			return "", false, invalid("Set column", c.Name)
		}
	}
	for _, c := range u.Where {
		if !fencerule.PlainName(c.Name, false) {
			return "", false, invalid("Where column", c.Name)
		}
	}
	switch u.Placeholder {
	case Dollar:
		return fence, true, nil
	case Question:
		return fence, false, nil
	}
	return "", false, fmt.Errorf("fence: update %s: unknown Placeholder %d: %w", u.Table, u.Placeholder, dlock.ErrInvalid)
}

// build returns the UPDATE, the SELECT of the matched rows' count and
// highest token, and the UPDATE's arguments: the Set values, the token,
// the Where values and (with Question placeholders) the token again. The
// SELECT takes the Where values alone.
func (u Update) build(token uint64) (update, check string, args []any, err error) {
	fence, dollar, err := u.validate()
	if err != nil {
		return "", "", nil, err
	}
	p := &params{dollar: dollar}
	var set, where []string
	for _, c := range u.Set {
		set = append(set, c.Name+" = "+p.next())
		args = append(args, c.Value)
	}
	tokenParam := p.next()
	set = append(set, fence+" = "+tokenParam)
	args = append(args, int64(token))
	for _, c := range u.Where {
		where = append(where, c.Name+" = "+p.next())
		args = append(args, c.Value)
	}
	if !dollar {
		tokenParam = p.next()
		args = append(args, int64(token))
	}
	update = "UPDATE " + u.Table + " SET " + strings.Join(set, ", ") +
		" WHERE " + strings.Join(where, " AND ") + " AND COALESCE(" + fence + ", 0) <= " + tokenParam
	// The check's placeholders count from 1 again.
	p = &params{dollar: dollar}
	where = where[:0]
	for _, c := range u.Where {
		where = append(where, c.Name+" = "+p.next())
	}
	check = "SELECT COUNT(*), COALESCE(MAX(COALESCE(" + fence + ", 0)), 0) FROM " + u.Table +
		" WHERE " + strings.Join(where, " AND ")
	return update, check, args, nil
}
