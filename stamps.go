package dlock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// stampBook remembers, per name, the holder's stamp (see
// driver.Result.Stamp) that this Locker's TryAcquire calls last saw, and
// when they first saw it, so that a caller that tries a name again and
// again (a scheduler's tick) takes over a crashed holder's lease in
// doubt as a waiter would: once the Locker has seen the same stamp for
// its StampTTL on its own monotonic clock. The book is bounded; a name
// dropped from it only starts its count again.
type stampBook struct {
	n     atomic.Int64 // len(names), so that the common case takes no lock
	mu    sync.Mutex
	names map[string]driver.Observer
}

// maxStampBook bounds the names a stampBook remembers.
const maxStampBook = 1024

// takeover returns the Takeover the next TryAcquire of name may send, or
// "" while the Locker has not seen the same stamp for long enough.
func (b *stampBook) takeover(name string, now time.Time) string {
	if b.n.Load() == 0 {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.names[name]
	if !ok {
		return ""
	}
	return o.Due(now)
}

// note records the outcome of a TryAcquire of name whose reply arrived
// at now.
func (b *stampBook) note(name string, res driver.Result, now time.Time) {
	if (res.Acquired || res.Stamp == "") && b.n.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	defer func() { b.n.Store(int64(len(b.names))) }()
	if res.Acquired || res.Stamp == "" {
		delete(b.names, name)
		return
	}
	if b.names == nil {
		b.names = make(map[string]driver.Observer)
	}
	o, ok := b.names[name]
	if !ok && len(b.names) >= maxStampBook {
		for k := range b.names { // drop any one: it only starts its count again
			delete(b.names, k)
			break
		}
	}
	o.Note(res, now)
	b.names[name] = o
}
