package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlock-go/dlock"
)

type workerOptions struct {
	dir, name, store      string
	id, workers           int
	ttl                   time.Duration
	noLock, pause, fenced bool
}

// newDemoWorkerCmd is the hidden command demo runs in each worker process.
func newDemoWorkerCmd() *cobra.Command {
	c := &cobra.Command{
		Use:    "demo-worker",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemoWorkerArgs(cmd.Context(), args, os.Getenv(demoStoreEnv))
		},
		DisableFlagParsing: true,
	}
	return c
}

// demoStoreEnv carries the store URL from demo to its worker processes.
const demoStoreEnv = "DLOCK_DEMO_STORE"

func runDemoWorkerArgs(ctx context.Context, args []string, store string) error {
	o := workerOptions{store: store}
	c := &cobra.Command{}
	f := c.Flags()
	f.StringVar(&o.dir, "dir", "", "")
	f.StringVar(&o.name, "name", "", "")
	f.IntVar(&o.id, "id", 0, "")
	f.IntVar(&o.workers, "workers", 1, "")
	f.DurationVar(&o.ttl, "ttl", time.Second, "")
	f.BoolVar(&o.noLock, "no-lock", false, "")
	f.BoolVar(&o.pause, "pause", false, "")
	f.BoolVar(&o.fenced, "fenced", false, "")
	if err := f.Parse(args); err != nil {
		return err
	}
	return demoWorker(ctx, o)
}

// demoWorker runs o.workers goroutines buying until the stock is gone, and
// logs every purchase to dir/sections-ID.
func demoWorker(ctx context.Context, o workerOptions) error {
	locker, err := dlock.Open(ctx, o.store)
	if err != nil {
		return err
	}
	defer locker.Close()
	logFile, err := os.Create(filepath.Join(o.dir, fmt.Sprintf("sections-%d", o.id)))
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := bufio.NewWriter(logFile)
	defer log.Flush()
	var mu sync.Mutex // guards log
	sh, err := openShop(filepath.Join(o.dir, "shop"))
	if err != nil {
		return err
	}
	defer sh.close()

	var wg sync.WaitGroup
	errs := make(chan error, o.workers)
	for g := range o.workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				// One goroutine per process stalls in its first purchase.
				stall := o.pause && g == 0 && n == 0
				s, more, err := buy(ctx, locker, sh, o, stall)
				if err != nil {
					errs <- err
					return
				}
				if !more {
					return
				}
				mu.Lock()
				fmt.Fprintf(log, "%d %d %d %d\n", s.fence, s.acquired, s.released, map[bool]int{false: 0, true: 1}[s.accepted])
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// buy makes one purchase. It reports false once the stock is gone.
func buy(ctx context.Context, l *dlock.Locker, sh shop, o workerOptions, stall bool) (section, bool, error) {
	var s section
	var lock *dlock.Lock
	if !o.noLock {
		opts := []dlock.Option{dlock.WithTTL(o.ttl)}
		if stall {
			// A paused process does not renew either.
			opts = append(opts, dlock.WithoutRenewal())
		}
		var err error
		if lock, err = l.Acquire(ctx, o.name, opts...); err != nil {
			return s, false, err
		}
		s.fence = lock.Fence()
		defer lock.Release(context.Background())
	}
	s.acquired = time.Now().UnixNano()
	stock, err := sh.read()
	if err != nil || stock <= 0 {
		return s, false, err
	}
	time.Sleep(200 * time.Microsecond) // take payment: the window a race needs
	if stall {
		time.Sleep(o.ttl * 3 / 2) // the holder stalls; its lease ends meanwhile
	}
	err = sh.write(stock-1, s.fence, o.fenced)
	s.accepted = err == nil
	if err != nil && !errors.Is(err, errStale) {
		return s, false, err
	}
	s.released = time.Now().UnixNano()
	return s, true, nil
}
