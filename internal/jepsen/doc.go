// Package jepsen puts a dlock backend through faults and checks the
// histories, in the manner of Jepsen: worker processes loop acquire,
// read-modify-write a fenced register, release; a nemesis injects one
// fault at a time; checkers read what happened.
//
// The register lives in a process of its own. Every operation on it
// carries the worker's fencing token and is refused if the token is below
// the highest it has accepted, so a stale holder cannot write after a
// newer holder has read. Workers record each operation, and the intervals
// during which they believed they held the lock, with CLOCK_MONOTONIC
// timestamps (all processes run on one host).
//
// The checkers:
//   - the workers' register operations are linearizable (porcupine);
//   - the register's accepted writes have strictly increasing fences and
//     each adds one to the last: no update is lost;
//   - no two believed-held intervals overlap, unless the worker holding
//     the older belief had no accepted operation during the overlap (a
//     paused worker that fencing stopped); the longest such stale belief
//     is reported;
//   - tokens never go down: an acquisition granted (Acquire returned)
//     after another had ended (its Release returned, or its loss was
//     observed) has a strictly higher fence; each one that has not is a
//     token inversion. This covers every acquisition whose Acquire was
//     called after the other ended, and a waiter handed an old grant late
//     (on an exclusive lock an older grant either overlapped the newer
//     holder or had lapsed, and must not be returned);
//   - every live worker, not only some, acquires again after the fault
//     ends (within the quiet phase plus a generous bound);
//   - after a holder is killed, another worker holds the lock within the
//     dead holder's lease (the TTL, or the session timeout on ZooKeeper
//     and etcd) plus a margin;
//   - a long-running worker leaks no goroutine and no socket once its
//     Locker is closed.
//
// The nemeses, each bounded in time: kill -9 the holder; SIGSTOP the
// holder past its lease; SIGSTOP it between its read and its write (its
// write then carries a stale fence, which the register must refuse); SIGSTOP the server past the TTL; restart the
// server; through a fault proxy per worker (Toxiproxy in-process), cut
// off the holder, everyone, or a worker right after it has queued, drop
// the holder's replies, add latency, reset every connection; and a
// Sentinel failover.
//
// Time nemeses, for the stores whose leases run on a wall clock the suite
// can step (Target.Clocks): Redis, Redis with persistence (redis-aof),
// Sentinel (master and replica on one clock), Redlock (a clock per
// master), PostgreSQL and MariaDB through testserver.Clock's LD_PRELOAD
// library, and SQLite, whose clock is each worker's own: the workers
// override SQLite's julianday('now') with the host's clock plus the
// Clock's offset (stepping the host's clock would disturb every other
// test on the host). The store's clock is stepped forward by 5 s (above
// the TTL: every lease ends at once by the store's clock) and back by
// 5 s, and forward and back by the clock bound B
// (driver.DefaultClockBound, 10 s); each nemesis steps three times, each
// while a worker holds the lock and two TTLs apart, so every lease
// predates at most one step (one step finds a waiter trying in the
// holder's remaining time only now and then). The steps stay until the
// run's workers have stopped (an undo would be a step the other way,
// another nemesis), then the clocks are put back. clock-one-forward-5s
// steps one Redlock master's clock only (the last: the restart nemeses
// restart the first, whose state is then younger than the others'); clock-back-restart-server steps
// the clock back by 5 s and restarts the server at once (the token a
// store without persistence hands out next may come from its clock).
// late-grant holds (not drops) a queued waiter's link past a grant's
// lease (redislock's is 2 s) and the TTL, then slows it by 100 ms for a
// second: a grant sent to it meanwhile arrives late.
//
// Documented exceptions: a store that forgets its locks (Redis without
// persistence restarted empty, an asynchronous Sentinel failover that
// loses the latest writes) may let a second worker in while the first
// still believes it holds the lock, until its next renewal finds the lock
// gone. The suite expects that there, and checks instead that fencing
// made it harmless: no accepted write with a fence at or below an
// earlier accepted one, and no lost update. The one condition that may
// invert tokens is a Redis without persistence restarted after its
// clock stepped back (plain Redis and Sentinel under
// clock-back-restart-server, Target.InvertsTokens): its inversions are
// counted apart in the report, not as violations; on redis-aof there
// must be none. A forward step of every Redlock master's clock ends the
// holder's keys early on a quorum: Redlock documents no exclusion then,
// so clock-forward-5s and clock-forward-10s are forgetful runs there
// (overlaps expected and fenced); one master's step is not.
//
// Semaphores (TestJepsenSemaphore): 4 workers take permits of a semaphore
// of 2 through the faults that take a holder away or cut it off (kill -9,
// SIGSTOP past the lease, a partition of the holder) and the server's own
// (restart, failover). A permit guards nothing exclusive, so there are no
// register operations; the checkers want at no time more than 2 believed
// holders (unless one in the excess was paused, or the store forgot its
// holders), a fence of its own for each permit, and progress after the
// fault.
//
// memlock keeps its locks in one process's memory: its workers run as
// goroutines of one process, through the same checkers, without faults
// (its contract under faults is checked by the core's synctest tests).
//
// Not covered: network faults and server pauses on a Redis Cluster, and
// network faults on Sentinel: their clients follow redirections to each
// node's own address, past any proxy.
package jepsen
