package main

import (
	"fmt"
	"time"
)

// Issue 28's runs at the SQL servers' default connection limits: ten
// processes (each one Locker, opened by store URL with the default pool)
// with 1,000 waiters on one name, and with 10,000 waiters on 1,000 names.

// limitProcs is how many processes the default-limit runs use.
const limitProcs = 10

// A default-limit run.
type limitRun struct {
	key, what         string
	contenders, names int
	settle            time.Duration
}

var limitRuns = []limitRun{
	{"one", "1,000 waiters on one name", 1001, 0, 2 * time.Second},
	{"names", "10,000 waiters on 1,000 names", 10_000, 1000, 3 * time.Second},
}

// issue28 holds issue 28's figures beside issue 16's.
type issue28 struct {
	admins map[string]*connAdmin // by store name: MariaDB, Postgres
	limits figures               // limitKey(store, run) -> metrics
	renew  figures               // scaleKey(store, held) -> renewal metrics
}

func limitKey(store, run string) string { return store + "/" + run }

// openAdmins opens the connection readers of the stores that have one.
func (b *bench) openAdmins() {
	b.i28 = issue28{admins: map[string]*connAdmin{}, limits: figures{}, renew: figures{}}
	for _, st := range b.scalingStores() {
		a, err := openConnAdmin(st)
		if err != nil {
			b.errorf("%s connection counters: %v", st.name, err)
			continue
		}
		if a != nil {
			b.i28.admins[st.name] = a
		}
	}
}

func (b *bench) closeAdmins() {
	for _, a := range b.i28.admins {
		a.db.Close()
	}
}

// roundLimits runs each default-limit run once on each limited store.
func (b *bench) roundLimits() {
	for _, r := range limitRuns {
		for _, st := range b.scalingStores() {
			if b.i28.admins[st.name] == nil {
				continue
			}
			if err := b.limitRun(st, r); err != nil {
				b.errorf("%s on %s: %v", r.what, st.name, err)
			}
		}
	}
}

// limitRun runs r on st and records its acquisitions, its handoff p50
// (one name only), the server's connection counters and the refusals.
func (b *bench) limitRun(st store, r limitRun) error {
	name := fmt.Sprintf("limits:%s:%s:%d", st.name, r.key, time.Now().UnixNano())
	spec := spreadSpec{contenders: r.contenders, procs: limitProcs, d: b.cfg.scaleDur, settle: r.settle, names: r.names}
	w := watchConns(b.i28.admins[st.name])
	halves, job, err := b.runSpread(scaleLib(st), st.url, name, spec)
	k := limitKey(st.name, r.key)
	if werr := w.end(b.i28.limits, k); werr != nil {
		b.errorf("%v", werr)
	}
	if err != nil {
		return err
	}
	acqs := 0
	for _, h := range halves {
		acqs += len(h.Events)
	}
	b.i28.limits.add(k, mAcqs, float64(acqs))
	b.i28.limits.add(k, mRefusedCli, float64(refusedErrors(halves)))
	if r.names == 0 {
		f := computeHot(halves, spec.contenders, job.StartNs, job.StopNs, nil)
		if len(f.handoffs) > 0 {
			b.i28.limits.add(k, mHandP50, float64(percentile(f.handoffs, 50)))
		}
		if f.overlaps > 0 {
			b.errorf("%s on %s: %d acquisitions began before the previous holder called release", r.what, st.name, f.overlaps)
		}
	}
	for _, h := range halves {
		for i, e := range h.Errors {
			if i == 3 {
				b.errorf("%s on %s: %d more errors", r.what, st.name, len(h.Errors)-i)
				break
			}
			b.errorf("%s on %s: %s", r.what, st.name, e)
		}
	}
	return nil
}
