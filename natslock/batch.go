package natslock

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Steps on one name are combined, per driver, into shared writes: many
// goroutines of one process that each ran its own read and
// compare-and-set on a busy key would make every write but one fail, and
// each retry cost the server a read and a write (see DESIGN.md,
// "Contention"). Instead the steps waiting on a name run in rounds: one
// caller (the leader) reads the key, or takes the state this driver last
// wrote, applies every waiting step in turn and writes once. A step's
// outcome is final only once a write carrying it succeeded, or it needed
// no write on a state just read; a conflict runs the whole round again.
// A round grants at most one new hold, so that each hold keeps a token of
// its own (the revision of the write that granted it).

// stepFunc changes st, read at revision rev, and returns whether to
// write it. It may run more than once; its last run decides.
type stepFunc func(st *state, rev uint64) (bool, error)

// pending is one step waiting for its round.
type pending struct {
	step     stepFunc
	done     func(rev uint64) // called with the revision that carried the step
	res      chan error       // the outcome, or errLead; buffered
	promoted bool             // the caller holds the lead; guarded by lines.mu
}

// errLead tells a waiting caller to run the next rounds.
var errLead = errors.New("natslock: lead")

// line is one name's queue in one driver, and the state this driver last
// wrote to its key. That state is trusted (a round starts from it, without
// a read) only while the key looks quiet: from a read that found the key
// still at the revision this driver wrote last, until a conflict. On a
// key that others write too, a round reads first, and wastes no write on
// a state it knows to be likely stale.
type line struct {
	waiting []*pending
	busy    bool   // a leader runs rounds
	st      state  // the state written at rev
	rev     uint64 // 0: nothing written
	trust   bool   // start rounds from st
}

// lines holds the lines of a driver, by name.
type lines struct {
	mu sync.Mutex
	m  map[string]*line
}

// maxLines bounds the idle lines a driver keeps; one dropped only loses
// the state it knew.
const maxLines = 4096

// join queues p on name's line and reports whether the caller must lead.
func (ls *lines) join(name string, p *pending) (*line, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ln := ls.m[name]
	if ln == nil {
		if ls.m == nil {
			ls.m = make(map[string]*line)
		}
		for k, o := range ls.m {
			if len(ls.m) < maxLines {
				break
			}
			if !o.busy && len(o.waiting) == 0 {
				delete(ls.m, k)
			}
		}
		ln = &line{}
		ls.m[name] = ln
	}
	ln.waiting = append(ln.waiting, p)
	lead := !ln.busy
	ln.busy, p.promoted = true, lead
	return ln, lead
}

// leave takes p, whose caller gave up, off ln, and reports whether it was
// still waiting; if not, a round has it and its outcome will come.
func (ls *lines) leave(ln *line, p *pending) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	i := slices.Index(ln.waiting, p)
	if i < 0 {
		return false
	}
	ln.waiting = slices.Delete(ln.waiting, i, i+1)
	if p.promoted {
		ls.handOff(ln)
	}
	return true
}

// handOff makes the first waiting caller of ln its leader, or leaves ln
// idle. ls.mu is held.
func (ls *lines) handOff(ln *line) {
	if len(ln.waiting) == 0 {
		ln.busy = false
		return
	}
	p := ln.waiting[0]
	p.promoted = true
	p.res <- errLead
}

// change runs step on name's state in the next round that writes the
// key, and returns its outcome; done gets the revision of that write
// when step asked for one (0 if none was needed).
func (d *natsDriver) change(ctx context.Context, name string, step stepFunc, done func(rev uint64)) error {
	p := &pending{step: step, done: done, res: make(chan error, 1)}
	ln, lead := d.lines.join(name, p)
	for !lead {
		select {
		case err := <-p.res:
			if err != errLead {
				return err
			}
			lead = true
		case <-ctx.Done():
			if d.lines.leave(ln, p) {
				return ctx.Err()
			}
			return <-p.res // a round has it; no lead can come now
		}
	}
	if ctx.Err() != nil && d.lines.leave(ln, p) {
		return ctx.Err()
	}
	d.lead(ctx, name, ln, p)
	return <-p.res
}

// lead runs rounds on ln until own's outcome is known, then hands the
// line on.
func (d *natsDriver) lead(ctx context.Context, name string, ln *line, own *pending) {
	for {
		d.lines.mu.Lock()
		batch := ln.waiting
		ln.waiting = nil
		for _, p := range batch {
			p.promoted = false
		}
		st, rev := ln.st.clone(), ln.rev
		if !ln.trust {
			st, rev = state{}, 0
		}
		d.lines.mu.Unlock()
		again, err := d.roundFor(ctx, name, ln, batch, st, rev)
		if err != nil {
			// An error of the store ends every step the round applied.
			for _, p := range batch {
				if !slices.Contains(again, p) {
					p.res <- err
				}
			}
		}
		d.lines.mu.Lock()
		ln.waiting = append(again, ln.waiting...)
		if len(own.res) > 0 {
			d.lines.handOff(ln)
			d.lines.mu.Unlock()
			return
		}
		d.lines.mu.Unlock()
	}
}

// roundFor runs round with the leader's context when the round carries
// its step alone; with others' steps, with a context the leader giving up
// does not end, so that it cannot cut short a write that carries their
// steps and leave it in doubt. Each request of a round is bounded by
// requestTimeout either way.
func (d *natsDriver) roundFor(ctx context.Context, name string, ln *line, batch []*pending, st state, rev uint64) ([]*pending, error) {
	if len(batch) > 1 {
		ctx = context.WithoutCancel(ctx)
	}
	return d.round(ctx, name, ln, batch, st, rev)
}

// round applies batch to st at rev (the state this driver last wrote;
// rev 0: read the key first) and writes the result, sending each step's
// outcome once it is final. It returns the steps to run again: a second
// grant, or all of them after a conflict or a known state that asked for
// no write (it may be stale: only a write checks it).
func (d *natsDriver) round(ctx context.Context, name string, ln *line, batch []*pending, st state, rev uint64) ([]*pending, error) {
	known := rev != 0
	if !known {
		var err error
		if st, rev, err = d.read(ctx, name); err != nil {
			return nil, err
		}
		d.quiet(ln, rev)
	}
	applied, again, puts, errs := apply(batch, &st, rev)
	write := slices.Contains(puts, true)
	if known && !write {
		d.forget(ln)
		return batch, nil
	}
	var n uint64
	if write && (rev != 0 || !st.empty()) {
		var err error
		if n, err = d.write(ctx, name, &st, rev); errors.Is(err, errConflict) {
			d.forget(ln)
			return batch, nil
		} else if err != nil {
			d.forget(ln)
			return again, err // ends applied's steps, by lead
		}
		d.remember(ln, &st, n)
	}
	for i, p := range applied {
		if puts[i] {
			p.done(n)
		}
		p.res <- errs[i]
	}
	return again, nil
}

// apply runs each step of batch in turn on st at rev, undoing a step's
// changes when it asks for no write, fails, or grants a second new hold
// (then it goes to again).
func apply(batch []*pending, st *state, rev uint64) (applied, again []*pending, puts []bool, errs []error) {
	for _, p := range batch {
		before := st.clone()
		put, err := p.step(st, rev)
		if put && err == nil && st.granted() > 1 {
			*st = before
			again = append(again, p)
			continue
		}
		if !put || err != nil {
			*st = before
			put = false
		}
		applied, puts, errs = append(applied, p), append(puts, put), append(errs, err)
	}
	return applied, again, puts, errs
}

// remember keeps st, just written at revision n, as ln's known state.
func (d *natsDriver) remember(ln *line, st *state, n uint64) {
	known, err := decode(st.encode(), n) // fills the new tokens and renewals
	d.lines.mu.Lock()
	defer d.lines.mu.Unlock()
	ln.st, ln.rev = known, n
	if err != nil {
		ln.rev, ln.trust = 0, false
	}
}

// quiet trusts ln's state again if the key was read at the revision this
// driver wrote last: nobody else wrote it since.
func (d *natsDriver) quiet(ln *line, rev uint64) {
	d.lines.mu.Lock()
	defer d.lines.mu.Unlock()
	ln.trust = ln.rev != 0 && ln.rev == rev
}

// forget stops trusting ln's state: the key changed since, or may have.
func (d *natsDriver) forget(ln *line) {
	d.lines.mu.Lock()
	defer d.lines.mu.Unlock()
	ln.trust = false
}
