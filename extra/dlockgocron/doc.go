// Package dlockgocron runs gocron v2 jobs on one of many processes, with
// dlock as the coordinator: NewLocker returns a gocron.Locker (each run
// takes a lock named after the job) and NewElector a gocron.Elector (the
// process that leads a name runs every job).
//
// Which to use: with the Elector one process runs every job until it
// stops or loses its lease, and another takes over within the TTL. With
// the Locker every run is decided separately, so jobs spread over the
// processes; it needs their ticks to coincide (CronJob, or WithStartAt on
// an interval boundary), and gocron leaves it to the Locker to keep a
// fast job's tick from running again on a process whose clock is a little
// behind: see LockerOptions.MinHold.
package dlockgocron
