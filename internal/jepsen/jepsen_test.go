package jepsen_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dlock-go/dlock/internal/jepsen"
	"github.com/dlock-go/dlock/internal/testserver"
	"github.com/dlock-go/dlock/internal/testworker"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	testworker.Run(jepsen.Workers)
	os.Exit(m.Run())
}

func TestSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	jepsen.RunAll(t, jepsen.Target{Name: "sqlite", URL: func(string) string { return "sqlite://" + path }}, jepsen.Options{})
}

func TestRedis(t *testing.T) {
	r := testserver.StartRedis(t)
	jepsen.RunAll(t, jepsen.Target{
		Name:     "redis",
		URL:      func(addr string) string { return "redis://" + addr },
		Upstream: r.Addr(),
		Server:   r,
		Forgets:  []string{"restart-server"},
	}, jepsen.Options{})
}
