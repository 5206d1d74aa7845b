package natslock

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// state is the value of a name's key: its holders, the semaphore limit
// they share, and a waiting writer's intent. An empty value (a released
// name) is the zero state.
type state struct {
	Limit   int      `json:"l,omitempty"`
	Holders []holder `json:"h,omitempty"`
	Intent  *holder  `json:"i,omitempty"` // only Owner, Rev and TTL are set
}

// holder is one hold of a name. Fence and Rev are 0 in the write that
// makes them, and read as that write's revision (see decode): the
// revision of the write that granted the hold, and of the write that
// last renewed it.
type holder struct {
	Owner    string `json:"o"`
	Fence    uint64 `json:"f,omitempty"`
	Rev      uint64 `json:"r,omitempty"`
	TTL      int64  `json:"t"`           // lease, in ms
	Delay    int64  `json:"d,omitempty"` // lock-delay, in ms
	Metadata string `json:"m,omitempty"`
	Shared   bool   `json:"s,omitempty"`
}

// decode reads the value of a key at revision rev.
func decode(b []byte, rev uint64) (state, error) {
	var st state
	if len(b) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("natslock: a key's value is not a lock's (%d bytes at revision %d): %w", len(b), rev, err)
	}
	for i := range st.Holders {
		st.Holders[i].fill(rev)
	}
	if st.Intent != nil {
		st.Intent.fill(rev)
	}
	return st, nil
}

// fill sets a hold's zero Fence and Rev to rev, the revision of the write
// that made them.
func (h *holder) fill(rev uint64) {
	if h.Fence == 0 {
		h.Fence = rev
	}
	if h.Rev == 0 {
		h.Rev = rev
	}
}

// encode returns the value that stores st; nil for the zero state.
func (st *state) encode() []byte {
	if st.empty() {
		return nil
	}
	b, _ := json.Marshal(st) // cannot fail: strings, numbers and bools
	return b
}

func (st *state) empty() bool { return len(st.Holders) == 0 && st.Intent == nil }

// clone returns a copy of st that shares nothing with it.
func (st *state) clone() state {
	c := state{Limit: st.Limit, Holders: slices.Clone(st.Holders)}
	if st.Intent != nil {
		in := *st.Intent
		c.Intent = &in
	}
	return c
}

// granted counts the holds of st that the next write grants (token 0).
func (st *state) granted() int {
	n := 0
	for _, h := range st.Holders {
		if h.Fence == 0 {
			n++
		}
	}
	return n
}

// find returns the index of owner's hold, or -1.
func (st *state) find(owner string) int {
	return slices.IndexFunc(st.Holders, func(h holder) bool { return h.Owner == owner })
}

// newHolder returns the hold l asks for, to be granted by the next write
// (Fence and Rev 0).
func newHolder(l driver.Lease) holder {
	return holder{Owner: l.Owner, TTL: l.TTL.Milliseconds(), Delay: l.Delay.Milliseconds(), Metadata: l.Metadata, Shared: l.Shared}
}

// renew marks h renewed by the next write, with lease l.
func (h *holder) renew(l driver.Lease) {
	h.Rev, h.TTL, h.Delay = 0, l.TTL.Milliseconds(), l.Delay.Milliseconds()
}

// life is how long a hold keeps its name after the write that last
// renewed it: its TTL plus its lock-delay.
func (h holder) life() time.Duration {
	return time.Duration(h.TTL+h.Delay) * time.Millisecond
}

// blockers returns the holds of st (and the intent) that keep l out.
func (st *state) blockers(l driver.Lease) []holder {
	var in []holder
	switch {
	case l.Limit > 0:
		if len(st.Holders) < l.Limit {
			return nil
		}
		in = st.Holders
	case l.Shared:
		for _, h := range st.Holders {
			if !h.Shared {
				in = append(in, h)
			}
		}
		if st.Intent != nil && st.Intent.Owner != l.Owner {
			in = append(in, *st.Intent)
		}
	default:
		in = st.Holders
	}
	return in
}

func mode(limit int) string {
	if limit > 0 {
		return fmt.Sprintf("a semaphore of %d", limit)
	}
	return "a lock"
}
