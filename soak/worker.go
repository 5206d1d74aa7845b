package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
)

// The workload each worker runs, as the issue describes it.
const (
	Goroutines = 32              // per worker process
	TTL        = 3 * time.Second // dlock.WithTTL of every acquisition
	AcquireCtx = 2 * time.Second // the deadline of each Acquire
	MaxHold    = 5 * time.Millisecond
)

// Mode is how a name is taken.
type Mode int

// The modes of the workload.
const (
	Exclusive Mode = iota
	Shared
	Permit
)

// Snapshot is what a worker reports at every sample: its process's
// figures and its counters since it started.
type Snapshot struct {
	T          int64             `json:"t"` // Unix milliseconds
	PID        int               `json:"pid"`
	RSSKB      int64             `json:"rss_kb"`
	HeapKB     int64             `json:"heap_kb"` // the Go heap in use (runtime.MemStats.HeapInuse)
	FDs        int               `json:"fds"`
	Goroutines int               `json:"goroutines"`
	Acquired   int64             `json:"acquired"`
	Lost       int64             `json:"lost"`       // Done closed before Release
	Violations int64             `json:"violations"` // holds the exclusion table refused
	Errors     map[string]int64  `json:"errors"`     // by kind (see Classify)
	Messages   map[string]string `json:"messages"`   // a sample message per kind
	FirstOK    int64             `json:"first_ok"`   // Unix ms of the first acquisition after the table's restart mark, 0 if none
	Final      bool              `json:"final"`      // written after the Locker was closed
}

// counters are a worker's, shared by its goroutines.
type counters struct {
	acquired, lost, violations, firstOK atomic.Int64

	mu       sync.Mutex
	errors   map[string]int64
	messages map[string]string
}

func (c *counters) fail(kind string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errors[kind]++
	if _, ok := c.messages[kind]; !ok {
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300]
		}
		c.messages[kind] = msg
	}
}

// Worker is the soak worker (see internal/testworker). Its args are the
// store URL, the exclusion table's path, the worker's number, the sample
// period and the path of the file it appends a Snapshot to (one JSON
// line, one write) at every period. It prints "ready" once its Locker is
// open and runs until ctx ends; then it closes its Locker and writes a
// final Snapshot.
func Worker(ctx context.Context, args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("soak worker: want STORE TABLE N PERIOD SAMPLES, got %q", args)
	}
	w, err := strconv.Atoi(args[2])
	if err != nil {
		return err
	}
	period, err := time.ParseDuration(args[3])
	if err != nil {
		return err
	}
	tab, err := OpenTable(args[1])
	if err != nil {
		return err
	}
	defer tab.Close()
	out, err := os.OpenFile(args[4], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	l, err := openRetry(ctx, args[0])
	if err != nil || l == nil {
		return err
	}
	fmt.Println("ready")
	c := &counters{errors: map[string]int64{}, messages: map[string]string{}}
	var wg sync.WaitGroup
	for range Goroutines {
		wg.Go(func() { loop(ctx, l, tab, w, c) })
	}
	report(ctx, out, c, period)
	wg.Wait()
	l.Close()
	return write(out, c, true)
}

// openRetry opens the store, retrying while it is down; it returns a nil
// Locker if ctx ends first.
func openRetry(ctx context.Context, store string) (*dlock.Locker, error) {
	for {
		octx, cancel := context.WithTimeout(ctx, TTL)
		l, err := dlock.Open(octx, store)
		cancel()
		if err == nil {
			return l, nil
		}
		if errors.Is(err, dlock.ErrBadURL) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		time.Sleep(TTL / 10)
	}
}

// report writes a Snapshot every period until ctx ends.
func report(ctx context.Context, out *os.File, c *counters, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		write(out, c, false)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func write(out *os.File, c *counters, final bool) error {
	s := Snapshot{T: time.Now().UnixMilli(), PID: os.Getpid(), Goroutines: runtime.NumGoroutine(), Final: final,
		Acquired: c.acquired.Load(), Lost: c.lost.Load(), Violations: c.violations.Load(), FirstOK: c.firstOK.Load()}
	s.RSSKB, s.FDs = selfFigures()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms) // one short stop of the world per sample period
	s.HeapKB = int64(ms.HeapInuse >> 10)
	c.mu.Lock()
	s.Errors, s.Messages = maps(c.errors), mapsS(c.messages)
	c.mu.Unlock()
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapsS(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// selfFigures returns this process's resident set (VmRSS, kB) and its
// number of open file descriptors.
func selfFigures() (rssKB int64, fds int) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rssKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	return rssKB, fds
}

// pick chooses the next name and mode: 80 % exclusive, 10 % shared (both
// on lock names), 10 % permits (on semaphore names).
func pick() (i int, name string, m Mode, opts []dlock.Option) {
	opts = []dlock.Option{dlock.WithTTL(TTL)}
	i = rand.N(Names)
	if i >= Names-SemaphoreNames {
		return i, "soak-sem-" + strconv.Itoa(i), Permit, append(opts, dlock.WithLimit(SemaphoreLimit))
	}
	if rand.N(9) == 0 {
		return i, "soak-lock-" + strconv.Itoa(i), Shared, append(opts, dlock.Shared())
	}
	return i, "soak-lock-" + strconv.Itoa(i), Exclusive, opts
}

// loop acquires, holds and releases names until ctx ends.
func loop(ctx context.Context, l *dlock.Locker, tab *Table, w int, c *counters) {
	for ctx.Err() == nil {
		i, name, m, opts := pick()
		actx, cancel := context.WithTimeout(ctx, AcquireCtx)
		k, err := l.Acquire(actx, name, opts...)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.fail(Classify(err, actx.Err() != nil), err)
				time.Sleep(time.Duration(rand.N(20)+1) * time.Millisecond)
			}
			continue
		}
		c.acquired.Add(1)
		if r := tab.Restarted(); r != 0 && time.Now().UnixNano() > r {
			c.firstOK.CompareAndSwap(0, time.Now().UnixMilli())
		}
		hold(k, tab, i, w, m, c)
	}
}

// hold checks the hold against the exclusion table, works 0-5 ms, and
// releases.
func hold(k *dlock.Lock, tab *Table, i, w int, m Mode, c *counters) {
	entered := tab.Enter(i, w, m)
	if !entered && k.Context().Err() == nil {
		c.violations.Add(1)
	}
	t := time.NewTimer(rand.N(MaxHold + 1))
	select {
	case <-t.C:
	case <-k.Done():
	}
	t.Stop()
	lost := k.Context().Err() != nil
	if entered {
		tab.Leave(i, w, m)
	}
	if lost {
		c.lost.Add(1)
	}
	rctx, cancel := context.WithTimeout(context.Background(), AcquireCtx)
	defer cancel()
	if err := k.Release(rctx); err != nil && !lost {
		c.fail("release: "+Classify(err, rctx.Err() != nil), err)
	}
}

// Classify names the kind of an Acquire or Release error: "no space"
// (dlock.ErrNoSpace), "too many connections" (PostgreSQL SQLSTATE 53300,
// MySQL error 1040), "connection refused", "timeout" (the call's
// deadline passed), "not acquired" (dlock.ErrNotAcquired otherwise),
// "not held" (dlock.ErrNotHeld: a Release that found the lease gone
// although Done had not closed), or "other".
func Classify(err error, deadline bool) string {
	msg := err.Error()
	switch {
	case errors.Is(err, dlock.ErrNoSpace):
		return "no space"
	case strings.Contains(msg, "53300"), strings.Contains(msg, "too many clients"),
		strings.Contains(msg, "Error 1040"), strings.Contains(msg, "Too many connections"):
		return "too many connections"
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case deadline || errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, dlock.ErrNotAcquired):
		return "not acquired"
	case errors.Is(err, dlock.ErrNotHeld):
		return "not held"
	}
	return "other"
}
