// Command example runs a gocron scheduler that runs its job on one of
// many processes, coordinated through a dlock store. Start three and watch
// one of them run each tick; kill it and another takes over:
//
//	cd extra/dlockgocron && go build -o /tmp/dlockgocron-example ./example
//	for i in 1 2 3; do /tmp/dlockgocron-example & done   # -mode locker to spread the runs
//	kill -9 PID-THAT-RUNS                                # another process runs the next ticks
//	kill %1 %2 %3
//
// With -mode elector (the default) the process that leads runs every tick;
// with -mode locker each tick goes to the first process to take its lock.
// -store is any dlock store URL (redis://host:6379, postgres://..., ...);
// the default, a SQLite file in the temporary directory, is shared by the
// processes of this machine only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	_ "modernc.org/sqlite" // the database/sql driver of sqlite:// URLs

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend"
	_ "github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/extra/dlockgocron"
	_ "github.com/dlock-go/dlock/redislock"
	_ "github.com/dlock-go/dlock/redlock"
	_ "github.com/dlock-go/dlock/sqllock"
	_ "github.com/dlock-go/dlock/sqllock/mysql"
	_ "github.com/dlock-go/dlock/sqllock/postgres"
	_ "github.com/dlock-go/dlock/zklock"
)

func main() {
	store := flag.String("store", "sqlite://"+filepath.Join(os.TempDir(), "dlockgocron-example.db"), "dlock store URL")
	mode := flag.String("mode", "elector", "elector or locker")
	ttl := flag.Duration("ttl", 5*time.Second, "lease of the leader or of a run: a dead process is replaced within about this time")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix(fmt.Sprintf("pid %d: ", os.Getpid()))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *store, *mode, *ttl); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, store, mode string, ttl time.Duration) error {
	l, err := dlock.Open(ctx, store)
	if err != nil {
		return err
	}
	defer l.Close()

	var opt gocron.SchedulerOption
	switch mode {
	case "elector":
		e, err := dlockgocron.NewElector(ctx, l, "dlockgocron-example", dlock.WithTTL(ttl))
		if err != nil {
			return err
		}
		defer e.Close()
		opt = gocron.WithDistributedElector(e)
	case "locker":
		k := dlockgocron.NewLocker(l, &dlockgocron.LockerOptions{Prefix: "dlockgocron-example/"}, dlock.WithTTL(ttl))
		opt = gocron.WithDistributedLocker(k)
	default:
		return fmt.Errorf("-mode %q: want elector or locker", mode)
	}
	s, err := gocron.NewScheduler(opt)
	if err != nil {
		return err
	}
	// Every 2 seconds on the clock, so that the processes' ticks coincide.
	_, err = s.NewJob(gocron.CronJob("*/2 * * * * *", true),
		gocron.NewTask(func() { log.Printf("ran the job") }),
		gocron.WithName("report"))
	if err != nil {
		return err
	}
	s.Start()
	log.Printf("scheduling on %s (%s mode)", backend.RedactURL(store), mode)
	<-ctx.Done()
	return s.Shutdown()
}
