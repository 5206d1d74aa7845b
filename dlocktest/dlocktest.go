// Package dlocktest is the conformance suite every dlock backend runs: one
// subtest per property of the contract, against a real store.
//
// A backend's test calls Run with a Harness describing how to make Lockers
// on the store under test and how to delete a lock behind its holder's
// back:
//
//	func TestConformance(t *testing.T) {
//		dlocktest.Run(t, dlocktest.Harness{
//			NewLocker: func(t testing.TB) *dlock.Locker {
//				l, err := mybackend.New(client, nil)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return l
//			},
//			Expire: func(t testing.TB, name string) { ... },
//		})
//	}
//
// The package's Example is the same, compiled, on memlock.
//
// Every failure message starts with the one-line property that broke.
//
// Besides Run, the package has what else a backend author needs:
// RunBenchmarks, the suite's benchmarks on the same Harness, and
// CheckRoundTrip, the property a fuzz target checks of names and metadata
// on the backend's store.
package dlocktest

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testkit"
)

// Harness describes the store under test. Fields are funcs so that adding
// a capability later breaks no existing harness.
type Harness struct {
	// NewLocker returns a new Locker on the store under test: a distinct
	// owner, as another process would be. The suite closes it. Required.
	NewLocker func(t testing.TB) *dlock.Locker

	// Expire deletes the lock on name from the store behind its holder's
	// back, as an administrator, an eviction or a failover would. Required.
	Expire func(t testing.TB, name string)

	// Ping makes one round trip to the store. Optional: benchmarks use it
	// to report costs as multiples of a round trip.
	Ping func(ctx context.Context) error

	// Queued returns how many owners wait in the store's queue for name,
	// not counting the holder. Optional: set it for backends that queue
	// waiters fairly, and the suite checks they are served in arrival
	// order.
	Queued func(t testing.TB, name string) int

	// LockerAndDriver returns a new Locker, as NewLocker does, and the
	// driver it runs on, for properties that call a driver step directly
	// on a lease the Locker holds (a refresh with another token). A
	// backend's test gets both from the path its constructor takes: it
	// makes the driver and passes it to dlock.NewLocker. Optional:
	// without it those properties are skipped.
	LockerAndDriver func(t testing.TB) (*dlock.Locker, driver.Driver)

	// NoModes is set for a backend that documents why it cannot have
	// shared locks and semaphores (it does not implement
	// driver.MultiHolder). The properties of those then check instead
	// that Shared and WithLimit fail with dlock.ErrUnsupported, take
	// nothing, and leave the name usable as a lock; and Observe runs with
	// exclusive holds.
	NoModes bool

	// NoAdmin is set for a backend that documents why it cannot list a
	// name's holders (Locker.Inspect) or free a name whatever its holder
	// (Locker.ForceRelease). The suite then checks that both, and
	// Locker.Observe, which reports what Inspect reads, fail with
	// dlock.ErrUnsupported; without it, any of them failing so fails the suite,
	// so that a backend does not pass by forgetting them.
	NoAdmin bool

	// NoResume is set for a backend that documents why it cannot move a
	// hold to another owner (it does not implement driver.Resumer):
	// Locker.Resume must then fail with dlock.ErrUnsupported and change
	// nothing.
	NoResume bool

	// NoExtend is set for a backend that documents why it cannot change
	// a held lease's length (it does not implement driver.Extender):
	// Lock.Extend must then fail with dlock.ErrUnsupported.
	NoExtend bool

	// NoLockDelay is set for a backend that documents why it cannot keep
	// a name past its holder's lease (it does not implement
	// driver.LockDelayer): WithLockDelay must then fail with
	// dlock.ErrUnsupported.
	NoLockDelay bool

	// TTL is the short lease used by tests that wait for expiry or
	// renewal. It must be at least driver.MinTTL. Default: 1s.
	TTL time.Duration
}

func (h Harness) ttl() time.Duration {
	if h.TTL > 0 {
		return h.TTL
	}
	return time.Second
}

type property struct {
	name string
	why  string // the one-line property, printed on failure
	run  func(t *testing.T, h Harness)
}

// modeProperties are the properties of shared locks and semaphores (see
// Harness.NoModes).
var modeProperties = map[string]bool{
	"SharedHolds": true, "Semaphore": true, "ModeMisuse": true, "SharedReentrancy": true, "SharedFencing": true,
	"WriterNotStarved": true, "SharedCancelledWait": true, "SemaphoreWaiting": true, "SharedRenewalAndLoss": true,
}

var properties = []property{
	{"TryAcquireExcludes", "while one owner holds a name, TryAcquire by any other owner fails with ErrNotAcquired", testTryAcquireExcludes},
	{"ReleaseFrees", "after Release the name can be taken at once by another owner, and the handle's Done is closed with cause ErrReleased", testReleaseFrees},
	{"ReleaseTwice", "a second Release of the same handle returns ErrNotHeld and frees nothing", testReleaseTwice},
	{"AcquireWokenPromptly", "a waiter in Acquire is woken promptly when the holder releases, not after a poll interval or the lease", testAcquireWoken},
	{"AcquireHonoursContext", "a cancelled or timed-out Acquire returns promptly with ctx's error and leaves nothing behind", testAcquireContext},
	{"Fairness", "waiters on different Lockers get the lock in the order they queued (skipped for backends without a queue)", testFairness},
	{"QueueFacts", "where the store queues, Waiters counts queued acquisitions and AcquireDone reports how many were ahead; a TryAcquire on a held name is Contended with Ahead -1", testQueueFacts},
	{"MutualExclusion", "many goroutines on several Lockers doing read-modify-write under one name never overlap and lose no update", testMutualExclusion},
	{"NamesIndependent", "locks on different names do not interfere, including names that differ only by special characters", testNamesIndependent},
	{"Reentrancy", "Acquire with a held lock's Context re-enters (same token), is counted, and only the last Release frees the name", testReentrancy},
	{"FencingIncreases", "fencing tokens strictly increase each time the name passes from free to held, including after expiry", testFencing},
	{"LeaseExpiresWithoutRenewal", "with WithoutRenewal the lease ends after its TTL: Done closes first, then another owner gets the name, not before", testLeaseExpires},
	{"RenewalHoldsLock", "an auto-renewed lock is held well past its TTL and nobody else gets it", testRenewal},
	{"RefreshChecksToken", "a driver's Refresh of a held lease with another token (Lease.Fence) fails with ErrNotHeld and leaves the lock held; with the lease's own token, or none, it extends (skipped without Harness.LockerAndDriver)", testRefreshChecksToken},
	{"RefreshExtends", "Refresh extends a WithoutRenewal lease", testRefresh},
	{"ExpireClosesDone", "a lock deleted behind its holder's back closes the holder's Done within one renewal interval, with cause ErrLost", testExpireClosesDone},
	{"LateReleaseIsSafe", "a Release after the lease expired and another owner took the name returns ErrNotHeld and does not free the new owner's lock", testLateRelease},
	{"BadInput", "bad names, TTLs and contexts get errors wrapping ErrInvalid, never a panic; odd but valid names work", testBadInput},
	{"Inspect", "Inspect reports a held name's owner, fencing token, lease and metadata, and nothing for free names (skipped if the backend cannot)", testInspect},
	{"MetadataRoundTrip", "metadata with separators, quotes, SQL, escapes, multi-byte text and the maximum length comes back from Inspect byte for byte; NUL bytes, invalid UTF-8 and oversized metadata get ErrInvalid and take nothing", testMetadataRoundTrip},
	{"ForceRelease", "ForceRelease frees a name whatever its owner, wakes waiters and closes the holder's Done (skipped if the backend cannot)", testForceRelease},
	{"ReleaseEndedContext", "Release with an ended ctx still frees the name on the server, and a waiter gets it", testReleaseEndedContext},
	{"DoAndAcquireAll", "Do runs fn under the lock and frees it; AcquireAll from two Lockers in opposite orders does not deadlock", testDoAndAcquireAll},
	{"Lead", "of two Lockers leading one name, one runs fn at a time, and fn's error ends Lead", testLead},
	{"SharedHolds", "shared holders hold a name together and keep writers out, a writer keeps readers out, and Inspect shows each holder with its mode", testSharedHolds},
	{"Semaphore", "a semaphore of n admits n holders with increasing tokens, refuses one more, and admits it when a permit is released; Inspect shows each permit", testSemaphore},
	{"ModeMisuse", "a lock used as a semaphore, semaphores of different limits, Shared with WithLimit and an upgrade fail with ErrInvalid and take nothing", testModeMisuse},
	{"SharedReentrancy", "shared re-enters shared, exclusive re-enters exclusive (Shared too), a permit re-enters its semaphore, all with the same token", testSharedReentrancy},
	{"SharedFencing", "every shared hold gets a token above every earlier one on the name, so a writer's token is above every earlier reader's", testSharedFencing},
	{"WriterNotStarved", "a waiting exclusive Acquire is not overtaken by shared acquisitions that come after it, and gets the name when the readers leave", testWriterNotStarved},
	{"SharedCancelledWait", "a cancelled exclusive wait behind a reader leaves nothing behind: new readers get in and nobody stays queued", testSharedCancelledWait},
	{"SemaphoreWaiting", "waiters on a full semaphore are woken when a permit is freed, never exceed the limit, and on a queueing store go in arrival order", testSemaphoreWaiting},
	{"SharedRenewalAndLoss", "shared holds and permits are renewed past their TTL; deleted or force-released behind their backs, every holder's Done closes with ErrLost", testSharedRenewalAndLoss},
	{"Observe", "Observe sends the holders of a name (empty while free) and then each change, and closes its channel when ctx ends", testObserve},
	{"LateAcquireFreed", "an acquisition whose request reaches the store after its caller gave up (the client returned at ctx's end) and takes the name is freed within seconds, not left held for its lease (skipped without Harness.LockerAndDriver)", testLateAcquireFreed},
	{"WaitsLeaveNothing", "a thousand waits from two Lockers, half served and half given up by ctx while queued, leave no goroutine behind once they end", testWaitsLeaveNothing},
	{"Resume", "Resume of a live hold's Token from another Locker keeps name and token under a new owner; the first holder's Refresh and Release then get ErrNotHeld, and a second Resume of the token too", testResume},
	{"ResumeRefused", "malformed and foreign tokens get ErrInvalid; a hold taken over gets ErrNotHeld and the new holder keeps it; a shared hold resumes shared", testResumeRefused},
	{"Extend", "Extend shortens a lease (another owner gets the name after the new TTL) and lengthens one (held past twice its old TTL unrenewed)", testExtend},
	{"LockDelay", "a hold WithLockDelay whose lease runs out unrenewed keeps the name (Inspect: Delayed) until TTL+delay, even after its holder's late Release; a released one frees it at once", testLockDelay},
	{"Warnings", "Lock.Warnings stays quiet while renewals succeed and closes with Done", testWarnings},
	{"Close", "Close releases held locks, wakes waiters with ErrClosed, makes later calls return ErrClosed, and stops every goroutine it started", testClose},
}

// Run runs the conformance suite against the store h describes, one
// subtest per property.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewLocker == nil || h.Expire == nil {
		t.Fatal("dlocktest: Harness.NewLocker and Harness.Expire are required")
	}
	if h.ttl() < driver.MinTTL {
		t.Fatalf("dlocktest: Harness.TTL %v is below driver.MinTTL", h.TTL)
	}
	for _, p := range properties {
		t.Run(p.name, func(t *testing.T) {
			if h.NoModes && modeProperties[p.name] {
				testNoModes(t, h)
				return
			}
			p.run(t, h)
			if t.Failed() {
				t.Logf("property: %s", p.why)
			}
		})
	}
}

// newLocker returns a Locker from h closed at the end of the test.
func newLocker(t testing.TB, h Harness) *dlock.Locker {
	t.Helper()
	l := h.NewLocker(t)
	t.Cleanup(func() { l.Close() })
	return l
}

// uniqueName returns a lock name no other test run uses, so suites can
// share a server.
func uniqueName(t testing.TB, suffix string) string {
	return testkit.UniqueName(t, "dlocktest") + suffix
}

// waitClosed waits up to limit for ch to close and returns how long it
// took, failing the test if it does not close in time.
func waitClosed(t *testing.T, ch <-chan struct{}, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("%s: not closed after %v", what, limit)
		return 0
	}
}
