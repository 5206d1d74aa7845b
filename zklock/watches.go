package zklock

import (
	"sync"

	"github.com/go-zookeeper/zk"
)

// minSweep is the size of a watchSet's map at which it first sweeps out
// the watches that have fired.
const minSweep = 64

// watchSet shares one watch per predecessor path among the waits of a
// driver. The zk client keeps a channel for every watch call until the
// watch fires, even when ZooKeeper holds one watch for the path: a waiter
// that gives up by its ctx again and again while the same holder holds
// (Acquire with a timeout, in a loop, against a lock held for days)
// would add one channel per attempt. With the set, they share one.
//
// Sharing is safe because the client closes a watch's channel right
// after it sends its only event (or, when the session ends, an error
// event): once the watch fires, every receive returns at once, so every
// wait on the channel wakes. An entry whose watch has fired is dropped
// by the wait that sees it fire, by the next look-up of its path, or by
// a sweep when the map has doubled since the last one, so the map holds
// at most about twice the watches that have not fired, at least
// minSweep.
type watchSet struct {
	mu      sync.Mutex
	m       map[string]<-chan zk.Event
	sweepAt int
}

// get returns the channel of path's watch if it has not fired.
func (s *watchSet) get(path string) (<-chan zk.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.m[path]
	if ok && fired(ev) {
		delete(s.m, path)
		return nil, false
	}
	return ev, ok
}

// put records ev as the channel of path's watch, unless another wait
// recorded a live one meanwhile, and returns the one to wait on.
func (s *watchSet) put(path string, ev <-chan zk.Event) <-chan zk.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[path]; ok && !fired(old) {
		return old // ev stays in the client until the same event
	}
	if s.m == nil {
		s.m = make(map[string]<-chan zk.Event)
	}
	if len(s.m) >= max(s.sweepAt, minSweep) {
		for p, c := range s.m {
			if fired(c) {
				delete(s.m, p)
			}
		}
		s.sweepAt = 2 * len(s.m)
	}
	s.m[path] = ev
	return ev
}

// drop forgets path's watch if its channel is ev, which has fired.
func (s *watchSet) drop(path string, ev <-chan zk.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[path] == ev {
		delete(s.m, path)
	}
}

// fired reports whether ev's watch has fired: its channel is closed, or
// holds its event. It may take the event: every later receive returns
// at once anyway, as the client closes the channel right after the
// send.
func fired(ev <-chan zk.Event) bool {
	select {
	case <-ev:
		return true
	default:
		return false
	}
}
