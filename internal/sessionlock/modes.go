package sessionlock

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// Mode is the kind of a queue entry: an exclusive or shared hold of a
// lock (Limit 0), or a permit of a semaphore of Limit permits.
//
// One FIFO queue per name holds entries of every kind, and every client
// applies the same rule to one read of it (Place), as Curator's
// InterProcessReadWriteLock and InterProcessSemaphoreV2 do:
//   - an exclusive entry holds when it heads the queue;
//   - a shared entry holds when no exclusive entry is before it;
//   - a permit of n holds when it is among the first n entries.
//
// So a writer that waits is never overtaken by readers that come after
// it: they queue behind it and the rule keeps them out until it leaves.
//
// The entries that hold are always a prefix of the queue (see Holding).
// Fencing tokens are the entries' creation order (a zxid, a revision), and
// an entry can only hold once every entry before it holds or has left; so
// the tokens of the holds on a name, in the order they became possible on
// the server, strictly increase, shared holds and permits included, and a
// writer's token is above every earlier reader's.
type Mode struct {
	Shared bool
	Limit  int
}

// ModeOf returns the mode of l.
func ModeOf(l driver.Lease) Mode { return Mode{Shared: l.Shared && l.Limit == 0, Limit: l.Limit} }

// Tag returns the prefix that records m in an entry's name, before the
// owner string: "" for an exclusive hold (so a mutex's entries are named
// as they always were), "S." for a shared hold, "P<n>." for a permit of n.
// Owner strings never contain '.'.
func (m Mode) Tag() string {
	switch {
	case m.Limit > 0:
		return "P" + strconv.Itoa(m.Limit) + "."
	case m.Shared:
		return "S."
	}
	return ""
}

// ParseTag splits an entry's name into its mode and the rest (the owner,
// and whatever the store appends). A name with a tag it does not know
// counts as exclusive, which keeps every other entry out while it heads
// the queue.
func ParseTag(s string) (Mode, string) {
	tag, rest, ok := strings.Cut(s, ".")
	if !ok {
		return Mode{}, s
	}
	switch {
	case tag == "S":
		return Mode{Shared: true}, rest
	case strings.HasPrefix(tag, "P"):
		if n, err := strconv.Atoi(tag[1:]); err == nil && n > 0 {
			return Mode{Limit: n}, rest
		}
	}
	return Mode{}, rest
}

func (m Mode) String() string {
	switch {
	case m.Limit > 0:
		return fmt.Sprintf("a semaphore of %d", m.Limit)
	case m.Shared:
		return "a lock (shared)"
	}
	return "a lock"
}

// compatible reports whether entries of modes m and o may queue for one
// name: both locks, or both semaphores of the same limit.
func (m Mode) compatible(o Mode) bool { return m.Limit == o.Limit }

// Ahead returns how many of the entries just before its own Place needs
// to see: 1 for an exclusive entry, Limit for a permit, all of them (0)
// for a shared entry. A store that can read the last k entries before a
// given one reads only these.
func (m Mode) Ahead() int {
	switch {
	case m.Limit > 0:
		return m.Limit
	case m.Shared:
		return 0
	}
	return 1
}

// Place applies the rule to an entry of mode m, given the modes of the
// entries just before it in queue order (oldest first): at least
// m.Ahead() of them when there are that many, or all of them when Ahead
// is 0. It reports whether the entry holds; if not, it returns the
// indexes in ahead of the entries whose leaving may let it in (it waits
// for any one of them):
//   - exclusive: the entry just before it;
//   - shared: the nearest exclusive entry before it;
//   - a permit of n: the n entries just before it. Any of them leaving
//     may admit it, and an entry further ahead leaving does not change
//     which n are just before it.
//
// An entry of an incompatible mode among ahead gets an error wrapping
// driver.ErrMode: the name is held or queued for as another kind. (An
// incompatible entry queued after it is not its concern: that one meets
// this entry ahead of it and fails.)
func Place(ahead []Mode, m Mode) (held bool, wait []int, err error) {
	for _, a := range ahead {
		if !a.compatible(m) {
			return false, nil, fmt.Errorf("held or queued for as %s: %w", a, driver.ErrMode)
		}
	}
	switch {
	case m.Limit > 0:
		if len(ahead) < m.Limit {
			return true, nil, nil
		}
		for i := len(ahead) - m.Limit; i < len(ahead); i++ {
			wait = append(wait, i)
		}
		return false, wait, nil
	case m.Shared:
		for i := len(ahead) - 1; i >= 0; i-- {
			if !ahead[i].Shared {
				return false, []int{i}, nil
			}
		}
		return true, nil, nil
	}
	if len(ahead) == 0 {
		return true, nil, nil
	}
	return false, []int{len(ahead) - 1}, nil
}

// Holding returns how many entries at the head of the queue q (modes in
// queue order) hold the name: the entries that hold are always a prefix,
// since an entry that does not hold keeps every entry after it out (an
// exclusive one by being ahead, a shared one because an exclusive entry
// is ahead of it, a permit because n are ahead of it, an incompatible one
// because the entries after it are incompatible with it or with the
// entries ahead of it).
func Holding(q []Mode) int {
	for i, m := range q {
		if held, _, err := Place(q[:i], m); !held || err != nil {
			return i
		}
	}
	return len(q)
}

// Waiting returns how many entries of the queue q (modes in queue order)
// wait for the name without holding it: those after the holding prefix.
func Waiting(q []Mode) int { return len(q) - Holding(q) }
