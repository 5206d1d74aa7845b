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
//   - every worker acquires again after the fault ends.
package jepsen
