// Package dlock provides distributed locks with one API over many stores.
//
// A Locker is created by a backend package (redislock, memlock, ...) and
// hands out Locks. Every backend keeps the same contract, implemented once
// in this package over the small interface in package driver:
//
//   - mutual exclusion: at most one owner holds a name at a time;
//   - only the owner refreshes or releases, each step one atomic,
//     owner-checked operation on the server;
//   - leases: a lock expires after its TTL unless renewed, and is renewed
//     automatically every TTL/3 until released (see WithoutRenewal);
//   - loss is a signal: Lock.Done and Lock.Context close as soon as
//     ownership can no longer be guaranteed, before the server-side lease
//     can have run out;
//   - reentrancy: Acquire with a held Lock's Context re-enters, with the
//     same fencing token; the last Release frees the name;
//   - fencing: every acquisition gets a token that strictly increases each
//     time the name passes from free to held;
//   - waiting is woken by the store where it can (pub/sub, watches,
//     LISTEN/NOTIFY), with a bounded fallback.
//
// The same contract covers shared (read) holds, with Shared, and counting
// semaphores, with WithLimit: each holder is a Lock with its own lease,
// renewal, Done and fencing token. On top of Acquire, Do runs a function
// under a lock, AcquireAll takes several names without deadlock, Lead
// runs a function whenever this Locker leads, and Observe reports who
// holds a name as it changes.
//
// A Locker reports its work (acquisitions, renewals, losses, releases) to
// hooks added with Locker.AddHook; package
// [github.com/dlock-go/dlock/hook] defines them and logs them with
// log/slog.
//
// Names are 1 to 255 bytes of valid UTF-8 without NUL bytes; any
// other byte, including '/', '{', '}', quotes and spaces, is allowed.
package dlock

// The files of this package, one concept each:
//
//	doc.go      the package documentation and this list
//	locker.go   the Locker type (its fields by concern), newLocker
//	options.go  Option and the per-call options, with their bounds
//	name.go     quote for error messages (names are checked by driver.ValidateName)
//	errors.go   the sentinel errors (but Open's ErrBadURL), ctxErr, and storeError:
//	            driver.StoreError with the Locker's driver's Classifier
//	acquire.go  Acquire, TryAcquire: attempt loop, store's queue, confirm, register
//	reenter.go  Acquire re-entering a name that its context's owner holds
//	owner.go    owners behind a Lock's Context, their context, owner strings
//	stamps.go   what TryAcquire saw of holders in doubt, for takeovers
//	wake.go     local waiters, woken when this Locker frees or loses a name
//	warn.go     Lock.Warnings: renewals failing while the lease runs, and recovering
//	yield.go    a released name left to other Lockers' waiters first, on stores without a queue
//	extend.go   Lock.Extend: a held lease set to another length, owner-checked
//	token.go    Lock.Token, Locker.Resume: a hold named in a string, adopted by another Locker
//	call.go     call: run a driver step; stop waiting for it when ctx ends
//	pool.go     the worker goroutines that run steps in the background
//	held.go     held: one acquisition, shared by its re-entered handles
//	books.go    the Locker's books of acquisitions (track, forget, lose), heaps
//	renew.go    the keeper (renewals, loss deadlines, reported losses), refreshes
//	lock.go     the Lock handle: its accessors and Refresh
//	release.go  Lock.Release, retries, abandon, the contexts of cleanup steps
//	close.go    Locker.Close, its signal, and the checks refusing work after it
//	hooks.go    AddHook, and the dispatch of events to package hook
//	admin.go    Inspect, Waiters, ForceRelease: the store's view, the override
//	observe.go  Observe: a name's holders as they change
//	do.go       Do: run a function under a lock (Lock.run, shared with Lead)
//	lead.go     Lead: run a function whenever this Locker leads
//	all.go      AcquireAll: several names without deadlock
//	open.go     Open, ErrBadURL: a Locker from a store URL, by registered scheme
//	backends.go for backend packages: NewLocker; URLMux and DefaultURLMux
//	            (the registry of schemes). Limits, LockerOptions, StoreError
//	            and ValidateName are in package driver
//
// The tests are in package dlock_test, beside these files.
