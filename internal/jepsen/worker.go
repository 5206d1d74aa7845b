package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"

	"github.com/dlock-go/dlock"
)

// event is one line of a worker's history.
type event struct {
	Ev       string `json:"ev"`             // "acquire" (called), "held", "end" (belief ended), "release" (Release returned), "call", "ret", "stall", "error"
	Worker   int    `json:"worker"`         // the worker's number
	Acq      int    `json:"acq"`            // the acquisition's number in this worker
	ID       int    `json:"id,omitempty"`   // a register operation's number in this worker (call and ret)
	Kind     string `json:"kind,omitempty"` // call: "read" or "write"
	Fence    uint64 `json:"fence,omitempty"`
	Value    int64  `json:"value,omitempty"` // call: written; ret: read or written
	Accepted bool   `json:"accepted,omitempty"`
	Why      string `json:"why,omitempty"` // end: "released" or the loss cause; error: the error
	T        int64  `json:"t"`             // CLOCK_MONOTONIC, ns
}

// history writes a worker's events, each with one write(2), so that a
// worker killed with -9 loses none it recorded.
type history struct {
	mu sync.Mutex
	f  *os.File
}

func (h *history) add(e event) {
	b, _ := json.Marshal(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f.Write(append(b, '\n'))
}

// Worker is the lock worker (see internal/testworker). Its args are a
// store URL, the register's address, the lock name, the TTL, the path of
// its history, its number, the semaphore's limit (0: a lock) and, for a
// SQLite store whose clock the runner steps, the Clock's file (see
// useSQLiteClock). It loops acquire, read, write, release
// until ctx ends, printing "ready" once its Locker is open. After it has
// closed its Locker it checks that no goroutine and no socket was left
// behind.
func Worker(ctx context.Context, args []string) error {
	return work(ctx, args, true)
}

func work(ctx context.Context, args []string, checkLeaks bool) error {
	if len(args) != 7 && len(args) != 8 {
		return fmt.Errorf("worker: want STORE REGISTER NAME TTL HISTORY N LIMIT [SQLITE-CLOCK], got %q", args)
	}
	if len(args) == 8 {
		if err := useSQLiteClock(args[7]); err != nil {
			return err
		}
	}
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	nums, err := atois(args[5], args[6]) // the worker's number, the limit
	if err != nil {
		return err
	}
	return onLocker(ctx, args[0], ttl, checkLeaks, func(l *dlock.Locker) error {
		return loop(ctx, l, args[1], args[2], ttl, nums[1], nums[0], args[4])
	})
}

// sharedWorkers is the worker process of a target whose workers share a
// Locker (Target.Shared): args are a store URL, the register's address,
// the lock name, the TTL, the semaphore's limit, the first worker's
// number, and one history path per worker (numbered on from the first).
// It opens one Locker, prints "ready", runs a worker loop per history on
// it, and after Close checks that nothing was left behind.
func sharedWorkers(ctx context.Context, args []string) error {
	if len(args) < 7 {
		return fmt.Errorf("shared workers: want STORE REGISTER NAME TTL LIMIT FIRST HISTORY..., got %q", args)
	}
	ttl, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	nums, err := atois(args[4], args[5]) // the limit, the first worker's number
	if err != nil {
		return err
	}
	return onLocker(ctx, args[0], ttl, true, func(l *dlock.Locker) error {
		paths := args[6:]
		errs := make([]error, len(paths))
		var wg sync.WaitGroup
		for i, path := range paths {
			wg.Go(func() { errs[i] = loop(ctx, l, args[1], args[2], ttl, nums[0], nums[1]+i, path) })
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// atois parses decimal integers.
func atois(ss ...string) ([]int, error) {
	ns := make([]int, len(ss))
	for i, s := range ss {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	return ns, nil
}

// onLocker opens store, prints "ready", runs body on the Locker and
// closes it. With checkLeaks, it then reports what was left behind: a
// long-running worker leaves nothing once its Locker is closed, no
// goroutine, no connection.
func onLocker(ctx context.Context, store string, ttl time.Duration, checkLeaks bool, body func(*dlock.Locker) error) error {
	goroutines := goleak.IgnoreCurrent()
	sockets0 := sockets()
	l, err := open(ctx, store, ttl)
	if l == nil {
		return err
	}
	fmt.Println("ready")
	err = body(l)
	l.Close()
	if err != nil || !checkLeaks {
		return err
	}
	return leftBehind(goroutines, sockets0)
}

// open opens store, trying again until it succeeds (the store may be down
// at first) or ctx ends (then it returns nil, nil).
func open(ctx context.Context, store string, ttl time.Duration) (*dlock.Locker, error) {
	for {
		octx, cancel := context.WithTimeout(ctx, ttl)
		l, err := dlock.Open(octx, store)
		cancel()
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if errors.Is(err, dlock.ErrBadURL) {
			return nil, err
		}
		time.Sleep(ttl / 4)
	}
}

// leftBehind reports goroutines and sockets beyond those there were
// before the Locker was opened.
func leftBehind(goroutines goleak.Option, sockets0 int) error {
	if err := goleak.Find(goroutines); err != nil {
		return fmt.Errorf("after Close: %w", err)
	}
	if n := sockets(); n > sockets0 {
		return fmt.Errorf("after Close: %d sockets open, %d before Open", n, sockets0)
	}
	return nil
}

// loop is worker n on l until ctx ends: acquire, read, write, release,
// recorded in the history at path.
func loop(ctx context.Context, l *dlock.Locker, regAddr, name string, ttl time.Duration, limit, n int, path string) error {
	opts := []dlock.Option{dlock.WithTTL(ttl)}
	if limit > 0 {
		opts = append(opts, dlock.WithLimit(limit))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := &history{f: f}
	reg := &registerClient{addr: regAddr, worker: n, http: &http.Client{Timeout: 10 * time.Second}}
	defer reg.http.CloseIdleConnections()
	opID := 0
	for acq := 1; ctx.Err() == nil; acq++ {
		reg.do(ctx, "waiting", 0, 0)
		h.add(event{Ev: "acquire", Worker: n, Acq: acq, T: now()})
		actx, cancel := context.WithTimeout(ctx, 10*ttl)
		k, err := l.Acquire(actx, name, opts...)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				h.add(event{Ev: "error", Worker: n, Acq: acq, Why: "acquire: " + err.Error(), T: now()})
				time.Sleep(ttl / 10)
			}
			continue
		}
		fence := k.Fence()
		h.add(event{Ev: "held", Worker: n, Acq: acq, Fence: fence, T: now()})
		var ended atomic.Bool
		end := func(why string) {
			if ended.CompareAndSwap(false, true) {
				h.add(event{Ev: "end", Worker: n, Acq: acq, Why: why, T: now()})
			}
		}
		go func() { // exits when the handle is released or lost
			<-k.Done()
			if cause := context.Cause(k.Context()); !errors.Is(cause, dlock.ErrReleased) {
				end(cause.Error())
			}
		}()
		reg.do(ctx, "acquired", fence, 0)
		op := func(kind string, value int64) (regOp, bool) {
			opID++
			h.add(event{Ev: "call", Worker: n, Acq: acq, ID: opID, Kind: kind, Fence: fence, Value: value, T: now()})
			r, err := reg.do(ctx, kind, fence, value)
			if err != nil {
				return r, false // unknown outcome: no ret line
			}
			h.add(event{Ev: "ret", Worker: n, Acq: acq, ID: opID, Kind: kind, Fence: fence, Value: r.Value, Accepted: r.Accepted, T: now()})
			return r, true
		}
		// A permit of a semaphore guards nothing exclusive: no register
		// operations.
		if limit == 0 {
			if r, ok := op("read", 0); ok && r.Accepted {
				if stallRequested(path) {
					// The runner stops this process (SIGSTOP) during this
					// sleep, past the TTL: on resume the write goes out with
					// a fence that may be stale, whatever Done says, as from
					// a process paused between its check and its write.
					h.add(event{Ev: "stall", Worker: n, Acq: acq, Fence: fence, T: now()})
					time.Sleep(ttl / 5)
				}
				op("write", r.Value+1)
			}
		}
		// Work a little while holding, so that faults find a holder,
		// then think a little, so that others get their turn.
		sleepCtx(k.Context(), rand.N(ttl/4))
		end("released")
		reg.do(ctx, "released", fence, 0)
		k.Release(context.Background())
		h.add(event{Ev: "release", Worker: n, Acq: acq, T: now()})
		sleepCtx(ctx, rand.N(ttl/10))
	}
	return nil
}

// stallRequested reports, once, whether the runner asked the worker with
// this history to stall (see the stall-holder nemesis).
func stallRequested(history string) bool {
	return os.Remove(history+".stall") == nil
}

// sockets counts this process's open sockets.
func sockets() int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// inProcessWorkers is the worker of an in-process target (see
// internal/testworker): args are a store URL, the register's address, the
// lock name, the TTL, and one history path per worker. It runs Worker for
// each as a goroutine and returns when they all have.
func inProcessWorkers(ctx context.Context, args []string) error {
	if len(args) < 6 {
		return fmt.Errorf("workers: want STORE REGISTER NAME TTL LIMIT HISTORY..., got %q", args)
	}
	goroutines := goleak.IgnoreCurrent()
	errs := make([]error, len(args)-5)
	var wg sync.WaitGroup
	for n, path := range args[5:] {
		wg.Go(func() {
			errs[n] = work(ctx, []string{args[0], args[1], args[2], args[3], path, strconv.Itoa(n), args[4]}, false)
		})
	}
	wg.Wait()
	if err := goleak.Find(goroutines); err != nil {
		errs = append(errs, fmt.Errorf("after Close: %w", err))
	}
	return errors.Join(errs...)
}
