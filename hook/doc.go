// Package hook defines what a [github.com/dlock-go/dlock.Locker] reports
// about its work, for logs, traces and metrics: a [Hook] is a struct of
// optional funcs, one per event, added with
// [github.com/dlock-go/dlock.Locker.AddHook]. Applications lock with
// package dlock; they import this package only to observe it, as
// net/http/httptrace keeps tracing out of net/http. It imports only the
// standard library.
//
// A hook sees, for every call that passes validation on an open Locker:
//
//   - AcquireStart and AcquireDone around each Acquire or TryAcquire that
//     does not re-enter (also those Do, AcquireAll and Lead make), with
//     the outcome, attempts on the store, whether the name was contended
//     and the fencing token;
//   - Reentered for an acquisition that re-enters a held lock;
//   - Renewed for each batch of automatic renewals;
//   - Lost when a held lock's Done closed because ownership could no
//     longer be guaranteed, with a [LossReason];
//   - Released when a lock is freed on the store, by the Release of its
//     last handle or by Locker.Close.
//
// Every acquisition that AcquireDone reports as [Acquired] later ends in
// exactly one Lost or Released, so a hook can count the locks held.
//
// # Goroutines and blocking
//
// Funcs are called synchronously, in the order the hooks were added, after
// the Locker has released its internal lock. AcquireStart, AcquireDone
// and Reentered run in the goroutine that called Acquire or TryAcquire;
// Released runs in the goroutine that called Release or Close. Renewed
// runs in the Locker's one background goroutine, and so does Lost, except
// when Lock.Refresh is the first to find the lock lapsed or gone: then
// Lost runs in the goroutine that called Refresh. A hook may be called
// from several goroutines at once, so it must be safe for concurrent use.
//
// Funcs must be quick: record, do not block. A slow AcquireStart or
// AcquireDone delays its caller; a slow Renewed or Lost delays the
// renewal of every other lock the Locker holds, which can make them lapse.
// A func may call the Locker's read-only methods (Backend, Waiters) but
// must not Acquire or Release.
package hook
