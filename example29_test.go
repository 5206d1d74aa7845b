package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/memlock"
)

// A job record keeps the lock's token, so that whoever finishes the job
// (another process after a restart, say) can resume and release the very
// hold that started it. The token grants nothing by itself: Resume checks
// with the store that the hold named is still there.
func ExampleLock_Token() {
	store := memlock.NewStore()
	scheduler, _ := memlock.New(store) // memlock.New cannot fail
	defer scheduler.Close()
	ctx := context.Background()

	lock, _ := scheduler.TryAcquire(ctx, "job/42")
	job := map[string]string{"id": "42", "lock": lock.Token()} // stored with the job
	fmt.Println(job["lock"] != "", lock.Fence())
	// Output: true 1
}

// Releasing from another process is Resume, then Release. The first
// holder learns of it at its next renewal: its Done closes and its
// Release frees nothing.
func ExampleLocker_Resume() {
	store := memlock.NewStore()
	first, _ := memlock.New(store) // memlock.New cannot fail
	defer first.Close()
	other, _ := memlock.New(store) // stands for another process
	defer other.Close()
	ctx := context.Background()

	lock, _ := first.TryAcquire(ctx, "job/42")
	token := lock.Token()

	resumed, err := other.Resume(ctx, token)
	fmt.Println(err, resumed.Name(), resumed.Fence() == lock.Fence())
	fmt.Println(resumed.Release(ctx))

	err = lock.Refresh(ctx) // as its next renewal would
	fmt.Println(errors.Is(err, dlock.ErrNotHeld), errors.Is(context.Cause(lock.Context()), dlock.ErrLost))
	_, err = other.Resume(ctx, token)
	fmt.Println(errors.Is(err, dlock.ErrNotHeld))
	// Output:
	// <nil> job/42 true
	// <nil>
	// true true
	// true
}

// A job that finds it needs longer than its lease asks for more; later
// renewals keep the new length.
func ExampleLock_Extend() {
	locker, _ := memlock.New(nil) // memlock.New cannot fail
	defer locker.Close()
	ctx := context.Background()

	lock, _ := locker.TryAcquire(ctx, "report/monthly", dlock.WithTTL(10*time.Second))
	if err := lock.Extend(ctx, 5*time.Minute); err != nil {
		fmt.Println("extend:", err)
		return
	}
	infos, _ := locker.Inspect(ctx, "report/monthly")
	fmt.Println(infos[0].Remaining > time.Minute, time.Until(lock.Deadline()) > time.Minute)
	lock.Release(ctx)
	// Output: true true
}

// With a lock-delay, a holder that dies (its lease runs out unrenewed)
// keeps the name from everyone for the delay more: storage that checks no
// fencing tokens gets time for that holder's last writes to land or
// fail. A Release frees the name at once.
func ExampleWithLockDelay() {
	store := memlock.NewStore()
	crashed, _ := memlock.New(store) // memlock.New cannot fail
	defer crashed.Close()
	next, _ := memlock.New(store)
	defer next.Close()
	ctx := context.Background()

	lock, _ := crashed.TryAcquire(ctx, "ledger", dlock.WithTTL(100*time.Millisecond),
		dlock.WithLockDelay(time.Minute), dlock.WithoutRenewal()) // stands for a holder that dies
	<-lock.Done()
	time.Sleep(100 * time.Millisecond) // its lease has run out now

	_, err := next.TryAcquire(ctx, "ledger")
	infos, _ := next.Inspect(ctx, "ledger")
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired), infos[0].Delayed)

	clean, _ := next.TryAcquire(ctx, "other", dlock.WithLockDelay(time.Minute))
	clean.Release(ctx)
	_, err = crashed.TryAcquire(ctx, "other")
	fmt.Println(err)
	// Output:
	// true true
	// <nil>
}
