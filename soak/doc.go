// Package soak is dlock's soak mode: a long-running ordinary workload on
// one backend at a time (4 worker processes, one Locker each, 32
// goroutines looping over 1,000 names), with the server killed with -9
// and restarted halfway, sampled at a fixed period, and judged by checks
// that fail on leaks, unbounded server state, refused connections, lost
// throughput and broken mutual exclusion.
//
// The test (soak_test.go) runs the workload; this package holds the
// worker (Worker, run in its own process by internal/testworker), the
// cross-process exclusion table (Table), the series of samples (Series)
// and the checks and report built from them. `make soak` runs every
// backend for DLOCK_SOAK_DURATION (8m) and writes soak/REPORT.md; under
// ./scripts/test each backend runs about 15 s (the short mode).
package soak
