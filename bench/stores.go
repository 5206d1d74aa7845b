package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite" // the sqlite:// scheme's database/sql driver

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/etcdlock" // etcd://
	"github.com/dlock-go/dlock/internal/testserver"
	_ "github.com/dlock-go/dlock/sqllock"          // sqlite://
	_ "github.com/dlock-go/dlock/sqllock/mysql"    // mysql://
	_ "github.com/dlock-go/dlock/sqllock/postgres" // postgres://
	_ "github.com/dlock-go/dlock/zklock"           // zk://
)

// The scaling charts and issue 16's SQL handoff run dlock on every
// backend. The servers other than Redis are started by dlock's own test
// harness (internal/testserver: importable here, since this module's path
// is under dlock's), given a stand-in for testing.TB; the Lockers are
// opened by store URL (dlock.Open), so the worker process opens the same
// store from the URL alone.

// store is one backend's server, as a dlock store URL.
type store struct {
	name     string // "Redis", "MariaDB", ...
	url      string
	adminDSN string // MariaDB, PostgreSQL: the database/sql DSN of the bench's own connection (connection counters)
}

// urlBackend is dlock on the store a URL names, opened by dlock.Open.
type urlBackend struct{ name string }

func (u urlBackend) Name() string { return u.name }

func (urlBackend) Open(url string) (*dlock.Locker, func() error, error) {
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		return nil, nil, err
	}
	return l, l.Close, nil
}

// storeNames are the backends besides Redis, in the report's order.
var storeNames = []string{"MariaDB", "Postgres", "SQLite", "ZooKeeper", "etcd"}

// storeLib is dlock on the named store, by URL: its key is "dlock-" + name.
func storeLib(name string) lib { return dlockLib(urlBackend{name}) }

// stores are the servers the benchmark started besides Redis; stop ends
// them.
type stores struct {
	list []store
	tb   *harnessTB
}

// startStores starts MariaDB, PostgreSQL, ZooKeeper and etcd with dlock's
// test harness, and makes a SQLite file in a temporary directory. A store
// whose server cannot start is left out, and its error returned with the
// others.
func startStores() (*stores, error) {
	s := &stores{tb: &harnessTB{}}
	var errs []error
	var adminDSN string
	add := func(name string, start func(t testing.TB) string) {
		adminDSN = ""
		url, err := s.tb.run(start)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return
		}
		s.list = append(s.list, store{name: name, url: url, adminDSN: adminDSN})
	}
	// MariaDB and PostgreSQL run at their default max_connections (151,
	// 100), the limits issue 28's targets name: testserver raises
	// PostgreSQL's to 300 for tests unless asked not to.
	add("MariaDB", func(t testing.TB) string {
		adminDSN = testserver.StartMariaDB(t).DSN()
		c, err := mysql.ParseDSN(adminDSN)
		if err != nil {
			t.Fatalf("mariadb dsn: %v", err)
		}
		return "mysql://" + c.User + "@" + c.Addr + "/" + c.DBName
	})
	add("Postgres", func(t testing.TB) string {
		adminDSN = testserver.StartPostgresDefaultLimits(t).DSN()
		return adminDSN
	})
	add("SQLite", func(t testing.TB) string { return "sqlite://" + filepath.Join(t.TempDir(), "locks.db") })
	add("ZooKeeper", func(t testing.TB) string {
		return "zk://" + testserver.StartZooKeeper(t, testserver.ZooKeeperHeap(1000)).Addr()
	})
	add("etcd", func(t testing.TB) string { return "etcd://" + testserver.StartEtcd(t).Addr() })
	return s, errors.Join(errs...)
}

func (s *stores) stop() { s.tb.cleanup() }

// harnessTB stands in for testing.TB so that internal/testserver runs
// outside a test: Fatalf and Skipf abort the start in progress (run
// returns their message), Errorf (only from stop paths) is kept, Cleanup
// runs at cleanup. Any other method of testing.TB would panic on the nil
// embedded interface: testserver uses only these.
type harnessTB struct {
	testing.TB
	cleanups []func()
	errs     []string
}

type harnessAbort struct{ msg string }

func (t *harnessTB) run(start func(t testing.TB) string) (url string, err error) {
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(harnessAbort)
			if !ok {
				panic(r)
			}
			err = errors.New(a.msg)
		}
	}()
	return start(t), nil
}

func (t *harnessTB) Helper()                        {}
func (t *harnessTB) Cleanup(f func())               { t.cleanups = append(t.cleanups, f) }
func (t *harnessTB) Fatalf(format string, a ...any) { panic(harnessAbort{fmt.Sprintf(format, a...)}) }
func (t *harnessTB) Fatal(a ...any)                 { panic(harnessAbort{fmt.Sprint(a...)}) }
func (t *harnessTB) Skipf(format string, a ...any)  { panic(harnessAbort{fmt.Sprintf(format, a...)}) }
func (t *harnessTB) Errorf(format string, a ...any) {
	t.errs = append(t.errs, fmt.Sprintf(format, a...))
}
func (t *harnessTB) Logf(string, ...any)      {}
func (t *harnessTB) Name() string             { return "bench" }
func (t *harnessTB) Context() context.Context { return context.Background() }
func (t *harnessTB) Failed() bool             { return len(t.errs) > 0 }
func (t *harnessTB) TempDir() string {
	dir, err := os.MkdirTemp("", "dlock-bench-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cleanup runs the cleanups, last first, as testing does.
func (t *harnessTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}
