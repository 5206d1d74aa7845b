package natslock

import (
	"slices"
	"strconv"
	"sync"
	"time"
)

// book remembers, per name, when this driver first saw each hold of it
// (and a writer's intent) as last renewed: an owner and the revision of
// its last renewal. A hold seen unchanged for its life (TTL plus
// lock-delay) on this process's monotonic clock has been given up by its
// holder, whose Done closes 0.9×TTL after it sent the renewal that wrote
// that revision, which it sent before this driver first saw it; Acquire
// then drops it. This is driver.Result.Stamp's rule, per hold, so that a
// dead permit or reader is taken out even while other holders of the
// name renew. No clock but this process's monotonic one is read.
type book struct {
	mu    sync.Mutex
	names map[string]map[string]time.Time // name → hold key → first seen
}

// maxBook bounds the names a book remembers; one dropped only starts its
// counts again.
const maxBook = 4096

func holdKey(h holder) string { return h.Owner + "@" + strconv.FormatUint(h.Rev, 10) }

// note records st, read from the store with its reply at now, as name's
// current holds, and returns how long ago this driver first saw each hold
// in st (and the intent), by holdKey.
func (b *book) note(name string, st *state, now time.Time) map[string]time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.names[name]
	if st.empty() {
		delete(b.names, name)
		return nil
	}
	seen := make(map[string]time.Time, len(st.Holders)+1)
	ages := make(map[string]time.Duration, len(st.Holders)+1)
	add := func(h holder) {
		k := holdKey(h)
		first, ok := old[k]
		if !ok {
			first = now
		}
		seen[k], ages[k] = first, now.Sub(first)
	}
	for _, h := range st.Holders {
		add(h)
	}
	if st.Intent != nil {
		add(*st.Intent)
	}
	if old == nil && len(b.names) >= maxBook {
		for k := range b.names {
			delete(b.names, k)
			break
		}
	}
	if b.names == nil {
		b.names = make(map[string]map[string]time.Time)
	}
	b.names[name] = seen
	return ages
}

// left returns how much of h's life is left by ages (see note): all of
// it for a hold not in ages, none for one seen for its life already.
func left(h holder, ages map[string]time.Duration) time.Duration {
	return max(h.life()-ages[holdKey(h)], 0)
}

// prune drops from st the holds (and intent) that were seen unchanged for
// their life, by ages (see note), and reports whether it dropped any.
func prune(st *state, ages map[string]time.Duration) bool {
	n := len(st.Holders)
	st.Holders = slices.DeleteFunc(st.Holders, func(h holder) bool { return left(h, ages) == 0 })
	dropped := len(st.Holders) != n
	if st.Intent != nil && left(*st.Intent, ages) == 0 {
		st.Intent, dropped = nil, true
	}
	return dropped
}
