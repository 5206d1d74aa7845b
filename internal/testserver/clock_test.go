package testserver_test

import (
	"database/sql"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock/internal/testserver"
)

// TestClockSteps checks that a Clock moves the wall clock of every C server
// it is given, while the server runs, forward and back.
func TestClockSteps(t *testing.T) {
	c := testserver.NewClock(t)
	r := testserver.StartRedisWith(t, testserver.RedisOptions{Clock: c})
	p := testserver.StartPostgresClock(t, c)
	m := testserver.StartMariaDBWith(t, &testserver.MariaDBOptions{Clock: c})
	rc := r.Client(t)
	pg, err := sql.Open("pgx", p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	my := m.DB(t)
	read := map[string]func() (time.Time, error){
		"redis": func() (time.Time, error) { return rc.Time(t.Context()).Result() },
		"postgres": func() (time.Time, error) {
			var us int64
			err := pg.QueryRowContext(t.Context(), `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&us)
			return time.UnixMicro(us), err
		},
		"mariadb": func() (time.Time, error) {
			var us int64
			err := my.QueryRowContext(t.Context(), `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`).Scan(&us)
			return time.UnixMicro(us), err
		},
	}
	for _, step := range []time.Duration{0, 30 * time.Second, -90 * time.Second} {
		c.Step(step)
		for name, f := range read {
			got, err := f()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if skew := time.Until(got) - c.Offset(); skew < -2*time.Second || skew > 2*time.Second {
				t.Errorf("%s clock after a step to %v: off by %v from the host's, want %v", name, c.Offset(), time.Until(got), c.Offset())
			}
		}
	}
}
