package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// figures holds one scenario's numbers: library key -> metric -> one value
// per round.
type figures map[string]map[string][]float64

func (f figures) add(lib, metric string, v float64) {
	if f[lib] == nil {
		f[lib] = make(map[string][]float64)
	}
	f[lib][metric] = append(f[lib][metric], v)
}

func (f figures) addCost(lib string, c cost) {
	f.add(lib, mOpTrips, c.trips)
	f.add(lib, mCliCPU, c.clientCPU)
	f.add(lib, mSrvCPU, c.serverCPU)
}

func (f figures) get(lib, metric string) spread { return spreadOf(f[lib][metric]) }

// Metric names.
const (
	mP50       = "p50"
	mP99       = "p99"
	mMean      = "mean"
	mRatio     = "ratio"
	mOps       = "ops"
	mWaitP50   = "wait_p50"
	mWaitP99   = "wait_p99"
	mWaitMax   = "wait_max"
	mHandP50   = "handoff_p50"
	mHandP99   = "handoff_p99"
	mSelf      = "self"
	mJain      = "jain"
	mCmds      = "cmds"
	mTrips     = "trips"
	mOpTrips   = "op_trips"
	mCliCPU    = "client_cpu"
	mSrvCPU    = "server_cpu"
	mGiveUps   = "giveups"
	mCensor    = "censored"
	mBytes     = "bytes"
	mBytesUsed = "bytes-used"
)

const warmOps = 200

// cost is what operations cost on average besides time: round trips, and
// CPU of this process and of redis-server, in ns.
type cost struct{ trips, clientCPU, serverCPU float64 }

// meter measures a cost from its creation to done.
type meter struct {
	b      *bench
	trips  int64
	client time.Duration
	server time.Duration
}

func (b *bench) meter() *meter {
	srv, _ := serverCPU(context.Background(), b.admin)
	return &meter{b: b, trips: trips.n.Load(), client: selfCPU(), server: srv}
}

// done returns the cost per operation of ops operations.
func (m *meter) done(ops int64) cost {
	srv, _ := serverCPU(context.Background(), m.b.admin)
	n := float64(max(ops, 1))
	return cost{
		trips:     float64(trips.n.Load()-m.trips) / n,
		clientCPU: float64(selfCPU()-m.client) / n,
		serverCPU: float64(srv-m.server) / n,
	}
}

// uncontended runs scenario 1 for l: one goroutine, acquire+release of one
// name, for d. It returns every operation's latency in ns and the cost
// per operation.
func (b *bench) uncontended(l lib, round int) ([]int64, cost, error) {
	var m *meter
	var c cost
	lat, err := lockLoop(l, b.addr, b.cfg.ttl, fmt.Sprintf("s1:%s:%d", l.key, round), b.cfg.uncontended, warmOps,
		func() { m = b.meter() }, func(n int) { c = m.done(int64(n)) })
	if err != nil {
		return nil, cost{}, err
	}
	return lat, c, nil
}

// lockLoop opens l on addr and times acquire+release of name as timeLoop
// does (warm unmeasured operations, then measure, then d, at least one
// operation); done gets the number of measured operations before the
// client closes.
func lockLoop(l lib, addr string, ttl time.Duration, name string, d time.Duration, warm int, measure func(), done func(int)) ([]int64, error) {
	lk, err := l.open(addr, ttl)
	if err != nil {
		return nil, err
	}
	defer lk.close()
	lat, err := cycleLoop(lk, name, d, warm, measure)
	if err != nil {
		return nil, err
	}
	done(len(lat))
	return lat, nil
}

// cycleLoop times acquire+release of name on lk as timeLoopN does.
func cycleLoop(lk locker, name string, d time.Duration, warm int, measure func()) ([]int64, error) {
	ctx := context.Background()
	op := func() error {
		unlock, err := lk.lock(ctx, name)
		if err != nil {
			return err
		}
		return unlock(ctx)
	}
	return timeLoopN(d, warm, op, measure)
}

// pingLoop measures single PINGs for half scenario 1's duration: its
// floor.
func (b *bench) pingLoop() ([]int64, cost, error) {
	c := newClient(b.addr)
	defer c.Close()
	ctx := context.Background()
	var m *meter
	lat, err := timeLoop(b.cfg.uncontended/2, func() error { return c.Ping(ctx).Err() }, func() { m = b.meter() })
	if err != nil {
		return nil, cost{}, err
	}
	return lat, m.done(int64(len(lat))), nil
}

// timeLoop runs op warmOps times unmeasured, calls measure, runs op for
// d, and returns the latencies, sorted.
func timeLoop(d time.Duration, op func() error, measure func()) ([]int64, error) {
	return timeLoopN(d, warmOps, op, measure)
}

// timeLoopN is timeLoop with warm unmeasured operations; it runs at
// least one measured operation, however long it takes.
func timeLoopN(d time.Duration, warm int, op func() error, measure func()) ([]int64, error) {
	for range warm {
		if err := op(); err != nil {
			return nil, err
		}
	}
	measure()
	lat := make([]int64, 0, 1<<16)
	end := time.Now().Add(d)
	for {
		t := time.Now()
		if !t.Before(end) && len(lat) > 0 {
			break
		}
		if err := op(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t).Nanoseconds())
	}
	slices.Sort(lat)
	return lat, nil
}

// distinct runs scenario 2 for l: b.cfg.goroutines goroutines sharing one
// client, each on its own name, acquire+release in a loop. It returns
// operations per second over the measured window, after a warm-up, and
// the cost per operation over the whole run.
func (b *bench) distinct(l lib, round int) (float64, cost, error) {
	lk, err := l.open(b.addr, b.cfg.ttl)
	if err != nil {
		return 0, cost{}, err
	}
	defer lk.close()
	warm := min(b.cfg.distinct/4, 250*time.Millisecond)
	t0 := time.Now()
	from, to := t0.Add(warm), t0.Add(warm+b.cfg.distinct)
	m := b.meter()
	var (
		ops   atomic.Int64
		all   atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for g := range b.cfg.goroutines {
		name := fmt.Sprintf("s2:%s:%d:%d", l.key, round, g)
		wg.Go(func() {
			ctx := context.Background()
			for {
				unlock, err := lk.lock(ctx, name)
				if err == nil {
					err = unlock(ctx)
				}
				if err != nil {
					errMu.Lock()
					first = cmpErr(first, err)
					errMu.Unlock()
					return
				}
				all.Add(1)
				now := time.Now()
				if !now.Before(to) {
					return
				}
				if !now.Before(from) {
					ops.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, cost{}, first
	}
	return float64(ops.Load()) / b.cfg.distinct.Seconds(), m.done(all.Load()), nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// hot runs scenario 3 for l: one name, b.cfg.hotGoroutines goroutines,
// half in this process and half in the worker process.
func (b *bench) hot(l lib, round int) (hotFigures, cmdStats, cmdStats, error) {
	name := fmt.Sprintf("s3:%s:%d", l.key, round)
	return b.hotOn(l, b.addr, name, spreadSpec{contenders: b.cfg.hotGoroutines, procs: 2, d: b.cfg.hot}, true)
}

// spreadSpec is a hot-name run: contenders goroutines over procs
// processes (this one and procs-1 workers), for d.
type spreadSpec struct {
	contenders, procs int
	d                 time.Duration
	// settle is added before d for the queue to form: the steady window
	// starts after it.
	settle time.Duration
	// steady, when set, measures CPU and Redis commands only over the
	// steady window, the run's last four fifths: see steadyCost.
	steady func(from, to time.Time)
	// names, when above 1, spreads the contenders over that many names
	// (see hotJob.Names) instead of one.
	names int
}

// hotOn runs a hot-name run of l on the store at addr; with redis set,
// addr is b.addr and the run's INFO commandstats and CPU deltas are read.
func (b *bench) hotOn(l lib, addr, name string, spec spreadSpec, redis bool) (hotFigures, cmdStats, cmdStats, error) {
	ctx := context.Background()
	var before, after cmdStats
	var srv0, srv1 time.Duration
	var err error
	if redis {
		if before, err = readCmdStats(ctx, b.admin); err != nil {
			return hotFigures{}, nil, nil, err
		}
		if srv0, err = serverCPU(ctx, b.admin); err != nil {
			return hotFigures{}, nil, nil, err
		}
	}
	halves, job, err := b.runSpread(l, addr, name, spec)
	if err != nil {
		return hotFigures{}, nil, nil, err
	}
	if redis {
		if srv1, err = serverCPU(ctx, b.admin); err != nil {
			return hotFigures{}, nil, nil, err
		}
		if after, err = readCmdStats(ctx, b.admin); err != nil {
			return hotFigures{}, nil, nil, err
		}
	}
	for _, h := range halves {
		for _, e := range h.Errors {
			b.errorf("hot %s on %s: %s", l.key, name, e)
		}
	}
	d := after.delta(before)
	f := computeHot(halves, spec.contenders, job.StartNs, job.StopNs, d)
	if redis && f.total > 0 {
		f.serverCPU = float64(srv1-srv0) / float64(f.total)
	}
	by := cmdStats{}
	for _, h := range halves {
		for k, v := range h.TripsBy {
			by[k] += v
		}
	}
	return f, d, by, nil
}

// runSpread runs one hot-name run of l on the store at addr: spec's
// goroutines spread evenly over this process and spec.procs-1 workers,
// from an instant 300 ms ahead for spec.d. It returns every process's
// half (this process's first) and this process's job.
func (b *bench) runSpread(l lib, addr, name string, spec spreadSpec) ([]hotHalf, hotJob, error) {
	procs := max(1, min(spec.procs, spec.contenders))
	if err := b.ensureWorkers(procs - 1); err != nil {
		return nil, hotJob{}, err
	}
	start := time.Now().Add(300 * time.Millisecond) // time for the workers to open their clients
	stop := start.Add(spec.settle + spec.d)
	var window int64
	var steady sync.WaitGroup
	if spec.steady != nil {
		from := start.Add(spec.settle + spec.d/5)
		window = from.UnixNano()
		steady.Go(func() { spec.steady(from, stop) })
	}
	jobs := make([]hotJob, procs)
	first := 0
	for i := range jobs {
		n := spec.contenders / procs
		if i < spec.contenders%procs {
			n++
		}
		jobs[i] = hotJob{
			Lib: l.key, Addr: addr, Name: name,
			Goroutines: n, FirstOwner: first,
			StartNs: start.UnixNano(), StopNs: stop.UnixNano(),
			Hold: b.cfg.hold, TTL: b.cfg.ttl, WindowNs: window, Names: spec.names,
		}
		first += n
	}
	halves := make([]hotHalf, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i := 1; i < procs; i++ {
		wg.Go(func() { halves[i], errs[i] = b.workers[i-1].run(jobs[i]) })
	}
	halves[0] = runHot(jobs[0])
	wg.Wait()
	steady.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, jobs[0], err
	}
	return halves, jobs[0], nil
}

// memory runs scenario 4 for l: the growth of used_memory while n
// distinct locks are held, per lock, less the change of the clients'
// connection memory (net), and without that correction (used).
func (b *bench) memory(l lib) (net, used float64, err error) {
	ctx := context.Background()
	const long = time.Hour // no lease runs out, no renewal comes due
	lk, err := l.open(b.addr, long)
	if err != nil {
		return 0, 0, err
	}
	closed := false
	defer func() {
		if !closed {
			lk.close()
		}
	}()
	const workers = 16
	// Warm up: open the pool's connections and load scripts, then forget.
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range 10 {
				if unlock, err := lk.lock(ctx, fmt.Sprintf("warm:%d:%d", g, i)); err == nil {
					unlock(ctx)
				}
			}
		})
	}
	wg.Wait()
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	before, err := usedMemory(ctx, b.admin)
	if err != nil {
		return 0, 0, err
	}
	cbefore, err := clientsMemory(ctx, b.admin)
	if err != nil {
		return 0, 0, err
	}
	if err := takeMany(lk, workers, 0, b.cfg.memLocks, func(i int) string { return fmt.Sprintf("mem:%07d", i) }); err != nil {
		return 0, 0, err
	}
	after, err := usedMemory(ctx, b.admin)
	if err != nil {
		return 0, 0, err
	}
	cafter, err := clientsMemory(ctx, b.admin)
	if err != nil {
		return 0, 0, err
	}
	keys, err := b.admin.DBSize(ctx).Result()
	if err != nil {
		return 0, 0, err
	}
	if keys != int64(b.cfg.memLocks) {
		b.errorf("memory %s: %d keys for %d held locks", l.key, keys, b.cfg.memLocks)
	}
	// dlock: Close releases what it holds (one round trip per lock);
	// flushing first makes those releases find nothing.
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	closed = true
	lk.close()
	n := float64(b.cfg.memLocks)
	return float64(after-before-(cafter-cbefore)) / n, float64(after-before) / n, nil
}

// takeMany takes the names name(from) to name(to-1) on lk with workers
// goroutines and keeps them; it returns the first error.
func takeMany(lk locker, workers, from, to int, name func(int) string) error {
	return parallel(workers, to-from, func(i int) error {
		_, err := lk.lock(context.Background(), name(from+i))
		return err
	})
}
