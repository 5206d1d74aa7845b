package testserver_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

// sqlServer is what the MariaDB and Postgres test servers have in common.
type sqlServer interface {
	DB(t testing.TB) *sql.DB
	Pause(t testing.TB)
	Resume(t testing.TB)
	Kill(t testing.TB)
	Restart(t testing.TB)
}

func quickPing(db *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// testSQLServer checks Pause, Resume, Restart (keeping data) and Kill.
func testSQLServer(t *testing.T, s sqlServer) {
	ctx := context.Background()
	db := s.DB(t)
	if err := quickPing(db); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE kept (v INT)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatalf("INSERT: %v", err)
	}

	s.Pause(t)
	if err := quickPing(db); err == nil {
		t.Fatal("SELECT 1 on a paused server succeeded")
	}
	s.Resume(t)
	if err := quickPing(db); err != nil {
		t.Fatalf("SELECT 1 after Resume: %v", err)
	}

	s.Restart(t)
	var v int
	if err := db.QueryRowContext(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("SELECT v after Restart = %d, %v; want 42, nil (data kept)", v, err)
	}

	s.Kill(t)
	if err := quickPing(db); err == nil {
		t.Fatal("SELECT 1 on a killed server succeeded")
	}
	s.Kill(t) // killing twice is harmless
	s.Restart(t)
	if err := quickPing(s.DB(t)); err != nil {
		t.Fatalf("SELECT 1 after Kill and Restart: %v", err)
	}
}

func TestMariaDB(t *testing.T) {
	testSQLServer(t, testserver.StartMariaDB(t))
}

func TestPostgres(t *testing.T) {
	testSQLServer(t, testserver.StartPostgres(t))
}

// TestPostgresCleanupKillsPausedServer checks that cleanup does not hang on
// a paused server and leaves nothing listening.
func TestPostgresCleanupKillsPausedServer(t *testing.T) {
	var dsn string
	t.Run("paused", func(t *testing.T) {
		p := testserver.StartPostgres(t)
		dsn = p.DSN()
		p.Pause(t)
	})
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := quickPing(db); err == nil {
		t.Fatal("SELECT 1 after cleanup of a paused server succeeded")
	}
}
