package dlockgocron

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/go-co-op/gocron/v2"
)

// ErrNotLeader is wrapped by the error Elector.IsLeader returns when this
// process does not lead.
var ErrNotLeader = errors.New("not the leader")

// Elector is a gocron.Elector that campaigns for a name with
// dlock.Locker.Lead: this process leads, and its scheduler runs jobs,
// while it holds the name. It is safe for concurrent use.
//
// A leader that dies is replaced once its lease has run out, so no tick
// of the dead leader's runs twice. A leader that closes hands over at
// once: a process whose clock is behind, by more than the time between
// the leader's last run and its Close, may then run that tick again.
type Elector struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed when the campaign has ended

	mu      sync.Mutex
	leading bool  // the campaign's fn is running
	err     error // why the campaign ended, once it has
	byCtx   bool  // it ended because its context did; valid after done
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector starts campaigning for name on l, with opts for each
// acquisition (for example dlock.WithTTL: a leader that dies is replaced
// within about that time). It returns at once; IsLeader tells whether
// this process leads yet.
//
// The campaign runs in one goroutine, which NewElector starts and Close
// stops. It campaigns again after each loss of leadership, and after a
// store failure (see dlock.Locker.Lead); it ends when ctx ends, when
// Close is called, or when l is closed. Leadership is released as it
// ends.
//
// The error wraps dlock.ErrInvalid if l is nil or name is not a valid
// lock name.
func NewElector(ctx context.Context, l *dlock.Locker, name string, opts ...dlock.Option) (*Elector, error) {
	if l == nil {
		return nil, fmt.Errorf("dlockgocron: elector %q: nil dlock.Locker: %w", name, dlock.ErrInvalid)
	}
	if err := driver.ValidateName(name); err != nil {
		return nil, fmt.Errorf("dlockgocron: elector: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Elector{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		err := l.Lead(ctx, name, e.lead, opts...)
		e.mu.Lock()
		e.err, e.byCtx = err, ctx.Err() != nil
		e.mu.Unlock()
		close(e.done)
	}()
	return e, nil
}

// lead is the function Lead runs while this process holds the name: it
// leads until leadership is lost or the campaign ends.
func (e *Elector) lead(ctx context.Context) error {
	e.setLeading(true)
	<-ctx.Done()
	e.setLeading(false) // before Lead releases the name
	return ctx.Err()
}

func (e *Elector) setLeading(v bool) {
	e.mu.Lock()
	e.leading = v
	e.mu.Unlock()
}

// IsLeader returns nil while this process leads, and otherwise an error
// wrapping ErrNotLeader (and, once the campaign has ended, why it ended).
// gocron calls it before each run of each job; ctx is not used.
func (e *Elector) IsLeader(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.leading:
		return nil
	case e.err != nil:
		return fmt.Errorf("dlockgocron: %q: campaign ended (%w): %w", e.name, e.err, ErrNotLeader)
	}
	return fmt.Errorf("dlockgocron: %q: %w", e.name, ErrNotLeader)
}

// Close ends the campaign, giving up leadership if this process leads,
// and waits for its goroutine to exit. It returns nil if the campaign ran
// until now or its context ended, and otherwise why it ended (the
// dlock.Locker was closed).
func (e *Elector) Close() error {
	e.cancel()
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byCtx {
		return nil
	}
	return e.err
}
