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
// Names are 1 to MaxNameLen bytes of valid UTF-8 without NUL bytes; any
// other byte, including '/', '{', '}', quotes and spaces, is allowed.
package dlock
