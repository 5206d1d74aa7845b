package hook_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

// Hear of a lost lock: a lock taken without renewal lapses before its
// TTL runs out, its Done closes and the hook's Lost is called.
func Example() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	lost := make(chan hook.Loss, 1)
	locker.AddHook(hook.Hook{
		Lost: func(ctx context.Context, e hook.Loss) {
			lost <- e // record, do not block: this runs in the Locker's background goroutine
		},
	})

	ctx := context.Background()
	lock, err := locker.Acquire(ctx, "reports/daily", dlock.WithTTL(200*time.Millisecond), dlock.WithoutRenewal())
	if err != nil {
		fmt.Println(err)
		return
	}
	<-lock.Done()
	e := <-lost
	fmt.Println("lost", e.Name, "with fence", e.Fence, "reason", e.Reason)
	// Output:
	// lost reports/daily with fence 1 reason expired
}

// Log a Locker's work with log/slog: losses and failed renewals at Warn,
// the rest at Debug. Add hooks right after making the Locker.
func ExampleSlog() {
	locker, _ := memlock.New(nil)
	defer locker.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "owner", "took", "held", "ttl", "cause":
				return slog.Attr{} // vary from run to run
			}
			return a
		},
	}))
	locker.AddHook(hook.Slog(logger))

	ctx := context.Background()
	lock, err := locker.Acquire(ctx, "reports/daily")
	if err != nil {
		fmt.Println(err)
		return
	}
	lock.Release(ctx)
	// Output:
	// level=DEBUG msg="dlock: acquiring" backend=memory name=reports/daily wait=true mode=exclusive
	// level=DEBUG msg="dlock: acquire" backend=memory name=reports/daily outcome=acquired attempts=1 contended=false fence=1
	// level=DEBUG msg="dlock: released" backend=memory name=reports/daily fence=1 outcome=released closed=false
}
