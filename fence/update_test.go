package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// recorder is a fence.DB that records the statements sent to it and
// reports every update as one row changed. Its QueryRowContext is never
// reached, since no update changes nothing.
type recorder struct {
	queries []string
	args    [][]any
}

func (r *recorder) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	r.queries = append(r.queries, query)
	r.args = append(r.args, args)
	return oneRow{}, nil
}

func (r *recorder) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	r.queries = append(r.queries, query)
	return nil
}

// oneRow is the sql.Result of an update that changed one row.
type oneRow struct{}

func (oneRow) LastInsertId() (int64, error) { return 0, nil }
func (oneRow) RowsAffected() (int64, error) { return 1, nil }

// TestUpdateStatement checks the statement Exec sends with each kind of
// placeholder, and the arguments bound to it.
func TestUpdateStatement(t *testing.T) {
	for _, tc := range []struct {
		placeholder fence.Placeholder
		query       string
		args        []any
	}{
		{fence.Dollar, "UPDATE app.accounts SET balance = $1, note = $2, version = $3 WHERE region = $4 AND id = $5 AND COALESCE(version, 0) <= $3",
			[]any{90, "x", int64(42), "eu", 7}},
		{fence.Question, "UPDATE app.accounts SET balance = ?, note = ?, version = ? WHERE region = ? AND id = ? AND COALESCE(version, 0) <= ?",
			[]any{90, "x", int64(42), "eu", 7, int64(42)}},
	} {
		var db recorder
		u := fence.Update{
			Placeholder: tc.placeholder,
			Table:       "app.accounts",
			Fence:       "version",
			Set:         []fence.Column{{Name: "balance", Value: 90}, {Name: "note", Value: "x"}},
			Where:       []fence.Column{{Name: "region", Value: "eu"}, {Name: "id", Value: 7}},
		}
		if err := u.Exec(t.Context(), &db, 42); err != nil {
			t.Fatalf("Exec with placeholder %d = %v, want nil", tc.placeholder, err)
		}
		if len(db.queries) != 1 || db.queries[0] != tc.query || !slices.Equal(db.args[0], tc.args) {
			t.Errorf("Exec with placeholder %d sent %q with %v, want %q with %v", tc.placeholder, db.queries, db.args, tc.query, tc.args)
		}
	}
}

// TestUpdateInvalid checks that Exec refuses what it cannot write into a
// statement safely, before sending anything.
func TestUpdateInvalid(t *testing.T) {
	const table = "accounts"
	where := []fence.Column{{Name: "id", Value: 7}}
	for _, bad := range []fence.Update{
		{Placeholder: fence.Dollar, Table: table},                                   // no Where
		{Placeholder: fence.Dollar, Table: "", Where: where},                        // no table
		{Placeholder: fence.Dollar, Table: table + "; DROP TABLE x", Where: where},  // not an identifier
		{Placeholder: fence.Dollar, Table: "a.b.c", Where: where},                   // two dots
		{Placeholder: fence.Dollar, Table: table, Fence: "version--", Where: where}, // bad fence column
		{Placeholder: fence.Dollar, Table: table, Fence: "s.version", Where: where}, // a column is never qualified
		{Placeholder: fence.Dollar, Table: table, Set: []fence.Column{{Name: "a b", Value: 1}}, Where: where},
		{Placeholder: fence.Dollar, Table: table, Set: []fence.Column{{Name: "fence", Value: 1}}, Where: where}, // sets the fence
		{Placeholder: fence.Dollar, Table: table, Where: []fence.Column{{Name: "id = 7 OR 1", Value: 1}}},
		{Placeholder: fence.Dollar, Table: table, Where: []fence.Column{{Name: "1id", Value: 1}}},
		{Table: table, Where: where},                 // no placeholder
		{Placeholder: 3, Table: table, Where: where}, // unknown placeholder
	} {
		var db recorder
		if err := bad.Exec(t.Context(), &db, 13); !errors.Is(err, dlock.ErrInvalid) || len(db.queries) > 0 {
			t.Errorf("Update%+v.Exec = %v, sent %q, want ErrInvalid, nothing sent", bad, err, db.queries)
		}
	}
	good := fence.Update{Placeholder: fence.Question, Table: table, Where: where}
	for _, token := range []uint64{0, 1 << 63} {
		var db recorder
		if err := good.Exec(t.Context(), &db, token); !errors.Is(err, dlock.ErrInvalid) || len(db.queries) > 0 {
			t.Errorf("Exec(token %d) = %v, sent %q, want ErrInvalid, nothing sent", token, err, db.queries)
		}
	}
}
