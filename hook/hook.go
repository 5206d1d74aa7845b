package hook

import "context"

// Hook observes a Locker's work: acquisitions, re-entries, renewals,
// losses and releases. Every field is optional; a nil field is never
// called, and the zero Hook observes nothing. Add hooks with
// [github.com/dlock-go/dlock.Locker.AddHook]; a Locker without hooks pays
// one atomic load per call for them. The package documentation says in
// which goroutine each field is called.
//
// [Slog] is a Hook; so are the OpenTelemetry and Prometheus adapters, in
// the modules under extra/ of the dlock repository.
type Hook struct {
	// AcquireStart is called when an Acquire or TryAcquire call that does
	// not re-enter begins its work on the store. It returns the context
	// that the next hook's AcquireStart and every hook's AcquireDone for
	// this call receive, for example one carrying a span; nil keeps ctx.
	AcquireStart func(ctx context.Context, e AcquireStart) context.Context

	// AcquireDone is called when that call returns, whatever the outcome.
	AcquireDone func(ctx context.Context, e AcquireDone)

	// Reentered is called when an Acquire or TryAcquire re-enters a lock
	// its context's owner holds (see Lock.Context in package dlock).
	Reentered func(ctx context.Context, e Reentry)

	// Renewed is called when a batch of automatic renewals completes.
	Renewed func(e Renewal)

	// Lost is called after a held lock's Done closed because ownership
	// could no longer be guaranteed. ctx carries the values of the
	// context that acquired the lock.
	Lost func(ctx context.Context, e Loss)

	// Released is called when a lock is freed on the store: by the
	// Release of its last handle, or by Locker.Close. It is not called
	// for a lock that was lost first.
	Released func(ctx context.Context, e Release)
}
