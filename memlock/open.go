package memlock

import (
	"context"
	"net/url"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
)

func init() { backend.Register("mem", open) }

var (
	namedMu sync.Mutex
	named   = map[string]*Store{}
)

// open serves store URLs of the form mem://[name]: Lockers opened with the
// same name share one Store in this process (mem:// names the store "").
// It takes no query parameters. Locks in memory are not shared between
// processes.
func open(_ context.Context, u *url.URL) (*dlock.Locker, error) {
	if _, err := backend.URLParams(u); err != nil {
		return nil, err
	}
	namedMu.Lock()
	defer namedMu.Unlock()
	s := named[u.Host]
	if s == nil {
		s = NewStore()
		named[u.Host] = s
	}
	return New(s)
}
