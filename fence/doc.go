// Package fence makes storage reject a stale lock holder: each write
// carries the holder's fencing token (dlock's Lock.Fence), and the store
// refuses, in the same atomic step as the write, a token below the
// highest one that has written.
//
// A lock alone cannot stop a holder that was paused (a GC pause, a stopped
// VM, a lost network) past its lease: when it resumes, it still believes
// it holds the lock and writes over its successor's work. Fencing closes
// that gap on the storage side. Tokens strictly increase each time a name
// passes from one holder to the next, so the store only has to remember
// the highest token it has accepted.
//
// # Rule
//
// A write with token t is accepted if t >= the stored token, and the
// stored token becomes t. It is refused with an error wrapping ErrStale if
// t < the stored token, and nothing is written. Equal tokens are accepted
// because one holder writes many times with its one token (and a
// re-entered lock shares it); two holders never share a token. A resource
// never written accepts any token. Tokens only order the holders of one
// lock name: fence each resource with the tokens of the one lock that
// guards it.
//
// Tokens must be between 1 and math.MaxInt64, the range every dlock
// backend issues and a SQL BIGINT holds; others are refused with an error
// wrapping dlock.ErrInvalid. Nothing in this package panics on its input.
//
// # Stores
//
// This package needs nothing but the standard library. The stores that
// need a client live with that client, in the backend's package, so a
// program links only the client it already uses:
//
//   - Guard (here) guards state in the process: Do runs a function under
//     a mutex if its token is not stale.
//   - Update (here) guards an UPDATE of the user's own table that keeps a
//     fence column in each row, on any database/sql database.
//   - sqllock.FenceTable is a table of fenced values in PostgreSQL,
//     MySQL/MariaDB or SQLite: one row per resource, written by one upsert
//     whose condition compares the token.
//   - redislock.Fence keeps a value and its token in one Redis hash,
//     written by one Lua script.
//   - etcdlock.Fence keeps the token in front of the value in one etcd
//     key, written by one transaction that compares it.
//
// The fence lives in the store next to the data. Anything that deletes or
// loses it also loses the protection: a Redis key evicted or a server
// restarted empty accepts any token again, as does a row or key deleted by
// hand. Keep fenced data where it is durable, and never give it an
// expiry.
//
// # Example
//
//	var g fence.Guard
//	err := g.Do(lock.Fence(), func() error {
//		// write the state this lock guards
//		return nil
//	})
//	if errors.Is(err, fence.ErrStale) {
//		// a newer holder has written: this one was paused past its lease
//	}
//
// ExampleGuard and ExampleUpdate show this package's stores; the others
// have examples in their backends' test modules.
package fence
