package etcdlock

// Wakeups returns how many times a queued waiter has been woken by a
// delete event since the process started.
func Wakeups() int64 { return wakeups.Load() }
