// Package dialects is how sqllock's dialect packages (sqllock/postgres,
// sqllock/mysql) give the core what needs their database driver: the
// connector for store URLs, the meaning of the driver's errors and, for
// PostgreSQL, LISTEN wake-ups. The core imports no driver, so a program
// links only the driver of the dialect package it imports. Only
// sqllock's own packages can import this one.
package dialects

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"net/url"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

// Kind is what an error of the database means to the core.
type Kind int

const (
	// Other is an error the core only returns.
	Other Kind = iota
	// Denied is a refusal of the credentials or of a step they are not
	// granted (the core wraps dlock.ErrDenied).
	Denied
	// NoSpace is a refusal to write for lack of space (the core wraps
	// dlock.ErrNoSpace).
	NoSpace
	// Retryable is a transaction rolled back by a deadlock or a
	// serialization failure, safe to run again as it was.
	Retryable
	// NoTable says that the table a statement names does not exist.
	NoTable
	// NoColumn says that a column a statement names does not exist.
	NoColumn
)

// Listener wakes the waiters of a table's names (PostgreSQL's LISTEN).
type Listener interface {
	// Watch returns a channel that receives when name may be free, and
	// the function that ends the watch.
	Watch(ctx context.Context, name string) (<-chan struct{}, func(), error)
	// Close stops the listener's goroutines, waiting for them; later
	// watches fail.
	Close() error
}

// Dialect is what a dialect package registers.
type Dialect struct {
	// Name is the dialect's name, as sqllock.Dialect's String method
	// gives it: "postgresql" or "mysql".
	Name string

	// Schemes are the store URL schemes the dialect serves.
	Schemes []string

	// Params are the query parameters its store URLs take besides the
	// core's (table, migrate, clock_bound, max_conns).
	Params []string

	// Connector returns the connector for the store URL u, whose query
	// parameters q were checked against the core's and Params. Its
	// errors about the URL wrap dlock.ErrBadURL.
	Connector func(u *url.URL, q url.Values) (sqldriver.Connector, error)

	// Classify says what err means, or Other for an error the driver
	// did not make.
	Classify func(err error) Kind

	// Listen, if not nil, returns the wake-ups of the waiters of the
	// names of a Locker on db whose table names the channel.
	Listen func(db *sql.DB, channel string) Listener

	// Cancel, if not nil, returns for a connection of the dialect's
	// database/sql driver (as sql.Conn.Raw gives it) the function that
	// asks the server to cancel the statement the connection runs, safe
	// to call while the statement runs, or nil if driverConn is not the
	// driver's.
	Cancel func(driverConn any) func(ctx context.Context) error
}

// Open serves the store URLs of every registered scheme. Package sqllock
// sets it in its init; a dialect package imports sqllock, so it is set
// before Register is called.
var Open func(ctx context.Context, u *url.URL) (*dlock.Locker, error)

var (
	mu       sync.RWMutex
	byName   = map[string]Dialect{}
	byScheme = map[string]Dialect{}
)

// Register records d and registers its schemes with dlock.Open. Dialect
// packages call it from init. It panics if d's name or a scheme is
// registered twice, or if sqllock has not set Open: both are
// programming errors, not input.
func Register(d Dialect) {
	if Open == nil {
		panic("sqllock: dialect " + d.Name + " registered before package sqllock's init")
	}
	mu.Lock()
	if _, dup := byName[d.Name]; dup {
		mu.Unlock()
		panic("sqllock: dialect " + d.Name + " registered twice")
	}
	byName[d.Name] = d
	for _, s := range d.Schemes {
		byScheme[s] = d
	}
	mu.Unlock()
	for _, s := range d.Schemes {
		backend.Register(s, Open)
	}
}

// Lookup returns the dialect registered under name.
func Lookup(name string) (Dialect, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := byName[name]
	return d, ok
}

// ForScheme returns the dialect that serves the store URL scheme.
func ForScheme(scheme string) (Dialect, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := byScheme[scheme]
	return d, ok
}

// Classify says what err means to the registered dialect whose driver
// made it, or Other.
func Classify(err error) Kind {
	if err == nil {
		return Other
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, d := range byName {
		if k := d.Classify(err); k != Other {
			return k
		}
	}
	return Other
}

// OneHost returns u's single host:port, with defaultPort if u gives
// none, or an error wrapping dlock.ErrBadURL.
func OneHost(u *url.URL, defaultPort int) (string, error) {
	hosts, err := backend.URLHosts(u, defaultPort)
	if err != nil {
		return "", err
	}
	if len(hosts) > 1 {
		return "", fmt.Errorf("%w: %s:// takes one host", dlock.ErrBadURL, u.Scheme)
	}
	return hosts[0], nil
}
