package dlockgocron_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockgocron"
	"github.com/dlock-go/dlock/memlock"
)

func ExampleNewLocker() {
	l, _ := memlock.New(memlock.NewStore()) // a shared store in production: dlock.Open("redis://...")
	defer l.Close()

	locker := dlockgocron.NewLocker(l, &dlockgocron.LockerOptions{Prefix: "cron/"}, dlock.WithTTL(10*time.Second))
	s, _ := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	ran := make(chan struct{})
	s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {
			fmt.Println("ran under the lock cron/report")
			close(ran)
		}),
		gocron.WithName("report"))
	s.Start()
	<-ran
	s.Shutdown()
	// Output: ran under the lock cron/report
}

func ExampleNewElector() {
	l, _ := memlock.New(memlock.NewStore()) // a shared store in production: dlock.Open("redis://...")
	defer l.Close()

	ctx := context.Background()
	e, _ := dlockgocron.NewElector(ctx, l, "scheduler", dlock.WithTTL(10*time.Second))
	defer e.Close()
	for e.IsLeader(ctx) != nil { // this process is alone: it leads at once
		time.Sleep(10 * time.Millisecond)
	}

	s, _ := gocron.NewScheduler(gocron.WithDistributedElector(e))
	ran := make(chan struct{})
	s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {
			fmt.Println("ran on the leader")
			close(ran)
		}))
	s.Start()
	<-ran
	s.Shutdown()
	// Output: ran on the leader
}
