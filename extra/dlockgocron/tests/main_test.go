package dlockgocron_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	_ "modernc.org/sqlite"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockgocron"
	"github.com/dlock-go/dlock/internal/testworker"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/sqllock"
)

func TestMain(m *testing.M) {
	testworker.Run(map[string]testworker.Func{"schedule": scheduleWorker})
	os.Exit(m.Run())
}

// scheduleWorker runs a gocron scheduler with a job every second, on the
// whole second, coordinated through the store at args[0]. args are STORE
// MODE COUNTER TTL SKEW: MODE is "elector" or "locker" (with
// "locker-nohold", MinHold is off); each run appends "TICK PID" to the
// file COUNTER (see runTick), and prints "ran TICK". In locker modes, each Lock is delayed by SKEW, as if
// this process's clock were that much behind. It prints "ready PID" once
// the scheduler runs, and runs until killed or signalled.
func scheduleWorker(ctx context.Context, args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("schedule: want STORE MODE COUNTER TTL SKEW, got %q", args)
	}
	store, mode, counter := args[0], args[1], args[2]
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	skew, err := time.ParseDuration(args[4])
	if err != nil {
		return err
	}
	l, err := dlock.Open(ctx, store)
	if err != nil {
		return err
	}
	defer l.Close()

	var opts []gocron.SchedulerOption
	switch mode {
	case "elector":
		e, err := dlockgocron.NewElector(ctx, l, "dlockgocron-test", dlock.WithTTL(ttl))
		if err != nil {
			return err
		}
		defer e.Close()
		opts = append(opts, gocron.WithDistributedElector(e))
	case "locker", "locker-nohold":
		o := &dlockgocron.LockerOptions{Prefix: "dlockgocron-test/"}
		if mode == "locker-nohold" {
			o.MinHold = -1
		}
		opts = append(opts, gocron.WithDistributedLocker(skewedLocker{dlockgocron.NewLocker(l, o, dlock.WithTTL(ttl)), skew}))
	default:
		return fmt.Errorf("schedule: unknown mode %q", mode)
	}
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		return err
	}
	pid := os.Getpid()
	var fileErr atomic.Value // of error
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
		tick := runTick(time.Now())
		f, err := os.OpenFile(counter, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintf(f, "%d %d\n", tick, pid)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fileErr.Store(err)
			fmt.Fprintf(os.Stderr, "schedule: counter file: %v\n", err)
		}
		fmt.Printf("ran %d late %v\n", tick, time.Since(time.Unix(tick, 0)))
	}), gocron.WithName("tick"))
	if err != nil {
		return err
	}
	s.Start()
	fmt.Printf("ready %d\n", pid)
	<-ctx.Done()
	if err := s.Shutdown(); err != nil {
		return err
	}
	if err, _ := fileErr.Load().(error); err != nil {
		return err
	}
	return nil
}

// runTick returns the tick, in Unix seconds, of a run of the job every
// whole second that started at start. gocron calls the job a little after
// its tick (lock, skew, scheduling); a tolerance for a start before it
// keeps a clock slewed by NTP from moving the run to the previous tick.
//
// gocron does give a run's scheduled time to a SchedulerMonitor
// (JobSchedulingDelay), but it is stale on a scheduler that skipped runs
// because another process led: gocron v2.21.2 keeps the skipped times.
func runTick(start time.Time) int64 {
	return start.Add(100 * time.Millisecond).Truncate(time.Second).Unix()
}

// skewedLocker delays each Lock by skew, as a scheduler whose clock is
// skew behind would.
type skewedLocker struct {
	gocron.Locker
	skew time.Duration
}

func (k skewedLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	time.Sleep(k.skew)
	return k.Locker.Lock(ctx, key)
}
