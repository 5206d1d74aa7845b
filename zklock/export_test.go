package zklock

// Wakeups returns how many times a queued waiter has been woken by a watch
// event since the process started.
func Wakeups() int64 { return wakeups.Load() }
