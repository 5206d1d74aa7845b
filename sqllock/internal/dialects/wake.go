package dialects

import "time"

// CloseTimeout bounds the goodbye to the server when a connection kept
// for wake-ups closes (PostgreSQL's LISTEN connection, MySQL's named
// locks).
const CloseTimeout = time.Second

// Wake sends a wake-up to each of the watchers in m, without blocking:
// a watcher's channel has room for one, and one pending is enough.
func Wake(m map[chan struct{}]struct{}) {
	for w := range m {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}
