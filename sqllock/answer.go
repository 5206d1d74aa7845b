package sqllock

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// An Acquire whose caller gives up while its statements run.
//
// database/sql returns as soon as a statement's context ends; pgx then
// drops the connection and sends the server a cancel request. But
// PostgreSQL cancels only a statement under way: a cancel request that
// reaches the session before the session has read the statement is
// ignored, and the statement then runs in full. On a loaded host a wait
// cancelled just after its upsert was sent thus took the name for the
// owner that gave up, after its Acquire had returned and after the
// holder's release, and the next TryAcquire failed until the core's late
// release of such grants, a second later (dlocktest's
// AcquireHonoursContext failed so, about once in 100 runs under load).
//
// So, where the dialect can cancel a statement (PostgreSQL), an Acquire
// runs its statements on one connection of the pool with a context that
// the caller's does not end. When the caller's ends, it sends the cancel
// request itself, which stops a statement that waits for a row lock or
// runs, and waits for the answer, which says what the server did: if the
// statements took the name, or recorded a writer's intent, Acquire frees
// it before it returns the caller's error. Nothing of the wait is left
// behind then, unless the server does not answer within answerTimeout:
// the connection is dropped as before, and the core's late release frees
// what the statement may still take.

// answerTimeout bounds how long an Acquire whose caller gave up waits for
// the answer to its statements and frees what they took: as long as the
// core waits for a queued acquisition to leave its queue.
const answerTimeout = driver.QueueLeaveTimeout

// acquireAnswered is Acquire's statements (acquireOn) for a caller whose
// ctx can end, on a dialect that can cancel a statement (d.cancel): see
// above.
func (d *sqlDriver) acquireAnswered(ctx context.Context, l driver.Lease) (driver.Result, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return driver.Result{}, err
	}
	var cancel func(context.Context) error
	if err := conn.Raw(func(dc any) error { cancel = d.cancel(dc); return nil }); err != nil {
		conn.Close()
		return driver.Result{}, err
	}
	stepCtx, drop := context.WithCancel(context.WithoutCancel(ctx))
	defer drop()
	var (
		asked    = make(chan struct{}) // closed once the cancel request is done
		deadline time.Time             // of the answer and the release; set before asked closes
		dropper  *time.Timer           // drops the connection at deadline
	)
	notAsked := context.AfterFunc(ctx, func() {
		defer close(asked)
		deadline = time.Now().Add(answerTimeout)
		dropper = time.AfterFunc(answerTimeout, drop)
		if cancel != nil {
			cctx, ccancel := context.WithDeadline(context.Background(), deadline)
			defer ccancel()
			cancel(cctx) // if it fails, the answer comes all the same, or the deadline drops the connection
		}
	})
	res, err := d.acquireOn(stepCtx, conn, l)
	if notAsked() {
		conn.Close()
		return res, err
	}
	// The cancel request is done, but the server signals the session
	// on its own time: it could still stop the next statement that the
	// connection runs for someone else. So the pool drops the
	// connection, as pgx does after a cancel of its own.
	<-asked
	dropper.Stop()
	conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	conn.Close()
	if err != nil {
		return driver.Result{}, err // nothing taken, or the connection was dropped
	}
	if res.Acquired || res.Queued {
		rctx, rcancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		rerr := d.Release(rctx, l)
		rcancel()
		if rerr != nil && !(res.Queued && errors.Is(rerr, driver.ErrNotHeld)) {
			return driver.Result{}, fmt.Errorf("%w, and the server took the name meanwhile; freeing it failed: %w", ctx.Err(), rerr)
		}
	}
	return driver.Result{}, ctx.Err()
}
