package fence

import (
	"fmt"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/fencerule"
)

// Guard fences state held in the process: a map, a file handle, a
// connection to something that cannot check tokens itself. The zero Guard
// is ready to use and accepts any valid token first. A Guard must not be
// copied after first use.
type Guard struct {
	mu    sync.Mutex
	fence uint64 // highest token accepted
}

// Do runs fn if token is not below the highest token Do has accepted, and
// returns fn's error. The check and fn run under the Guard's mutex, so no
// other Do of the same Guard runs in between: once a holder's token is
// accepted, a stale holder cannot slip a change in under it.
//
// The token is recorded as soon as it is accepted, even if fn then fails:
// a newer holder has started changing the state, so older holders stay
// out. If token is stale, fn is not called and the error wraps ErrStale;
// if token is 0 or above math.MaxInt64, or fn is nil, the error wraps
// dlock.ErrInvalid.
func (g *Guard) Do(token uint64, fn func() error) error {
	if err := fencerule.CheckToken(prefix, token); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("fence: Guard.Do with a nil func: %w", dlock.ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if token < g.fence {
		return fmt.Errorf("fence: guard: token %d is below %d: %w", token, g.fence, ErrStale)
	}
	g.fence = token
	return fn()
}

// Fence returns the highest token Do has accepted, or 0 if none.
func (g *Guard) Fence() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fence
}
