package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

var (
	// ErrNotAcquired is returned by TryAcquire when another owner holds
	// the name.
	ErrNotAcquired = errors.New("dlock: not acquired")

	// ErrNotHeld is returned by Refresh and Release when the lock is no
	// longer held: released already, lost, or taken over after expiry.
	ErrNotHeld = errors.New("dlock: not held")

	// ErrClosed is returned by every call on a Locker after Close.
	ErrClosed = errors.New("dlock: locker closed")

	// ErrInvalid is wrapped by the errors for bad input: an empty,
	// oversized or malformed name, or an out-of-range option.
	ErrInvalid = driver.ErrInvalid

	// ErrUnsupported is returned by Locker methods the backend cannot
	// provide, such as Inspect on a store that cannot list holders.
	ErrUnsupported = errors.New("dlock: not supported by this backend")

	// ErrLost is the context.Cause of a Lock's Context once ownership can
	// no longer be guaranteed (renewal failed, lease gone, session
	// expired).
	ErrLost = errors.New("dlock: lock lost")

	// ErrReleased is the context.Cause of a Lock's Context after Release.
	ErrReleased = errors.New("dlock: lock released")

	// ErrDenied is wrapped by the errors of a store that refuses the
	// Locker's credentials, or a step they are not granted: a wrong
	// password or certificate, a missing GRANT, ACL or role. It is
	// wrapped together with the store's own error, which names what was
	// refused; retrying does not help. (A backend's driver tells such
	// errors with driver.Classifier; the Locker wraps this sentinel.)
	ErrDenied = driver.ErrDenied

	// ErrNoSpace is wrapped by the errors of a store that refuses writes
	// for lack of space: etcd's NOSPACE alarm (its backend quota), Redis
	// over maxmemory with a noeviction policy, a full disk or table on a
	// SQL database, a SQLite file at its page limit. It is wrapped
	// together with the store's own error, as ErrDenied is. Retrying does
	// not help until an operator frees space (for etcd: compact,
	// defragment, disarm the alarm); releases and lease expiry still free
	// names.
	ErrNoSpace = driver.ErrNoSpace
)

// ctxErr returns the error for an ended ctx: it wraps both ctx.Err(), so
// errors.Is(err, context.Canceled) holds, and context.Cause(ctx) when that
// says more.
func ctxErr(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		if cause == nil {
			return err
		}
		return cause
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// storeError is driver.StoreError with the Locker's driver's
// Classifier: every driver step's error passes through it (acquireOne,
// acquireQueued, startWait, refreshSteps, release, the admin calls,
// Observe, reported losses).
func (l *Locker) storeError(err error) error {
	if err == nil || l.errKinds == nil {
		return err
	}
	return driver.StoreError(l.errKinds, err)
}

// saidOnce is an error that wraps errs, for errors.Is and errors.As, but
// reads as msg: the core's errors say the name, the step and the cause
// once, where wrapping each layer's error would repeat them.
type saidOnce struct {
	msg  string
	errs []error
}

func (e *saidOnce) Error() string   { return e.msg }
func (e *saidOnce) Unwrap() []error { return e.errs }

// withoutPrefix returns a driver's error text without the prefix that
// repeats what the core's says: "pkg: acquire NAME: " (quoted NAME),
// where pkg is one word. Any other text is returned whole.
func withoutPrefix(text, quotedName string) string {
	pkg, rest, ok := strings.Cut(text, ": acquire "+quotedName+": ")
	if !ok || pkg == "" || strings.ContainsAny(pkg, ` :"`) {
		return text
	}
	return rest
}

// modeDetail returns what a driver's error wrapping driver.ErrMode says
// of the name's mode ("held as a lock"): its last part before the
// sentinel, which every driver words as how the name is held.
func modeDetail(err error) string {
	text := strings.TrimSuffix(err.Error(), ": "+driver.ErrMode.Error())
	if i := strings.LastIndex(text, ": "); i >= 0 {
		text = text[i+2:]
	}
	if text == "" || text == driver.ErrMode.Error() {
		return "held in another mode"
	}
	return text
}

// errorf is fmt.Errorf for the core's errors: the text says "dlock: "
// once, at its start, where the errors it wraps (the sentinels, the
// core's own) would repeat it ("dlock: acquire "x": dlock: not acquired"
// reads "dlock: acquire "x": not acquired"). errors.Is and errors.As see
// everything fmt.Errorf would wrap.
func errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	text := err.Error()
	if !strings.Contains(text, ": dlock: ") {
		return err
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		return said(text, u.Unwrap()...)
	case interface{ Unwrap() error }:
		return said(text, u.Unwrap())
	}
	return said(text)
}

// said returns an error that reads as msg, with "dlock: " said once, and
// wraps errs: a saidOnce, or for one error a saidOnce1, which
// errors.Unwrap unwraps as it would fmt.Errorf's error with one %w.
func said(msg string, errs ...error) error {
	msg = strings.ReplaceAll(msg, ": dlock: ", ": ")
	if len(errs) == 1 {
		return &saidOnce1{msg: msg, err: errs[0]}
	}
	return &saidOnce{msg: msg, errs: errs}
}

// saidOnce1 is saidOnce for one wrapped error.
type saidOnce1 struct {
	msg string
	err error
}

func (e *saidOnce1) Error() string { return e.msg }
func (e *saidOnce1) Unwrap() error { return e.err }
