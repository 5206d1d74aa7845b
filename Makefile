# Benchmarks live in bench/, a module of their own so that the peer
# libraries (redsync, bsm/redislock) never enter dlock's go.mod.

.PHONY: bench bench-quick

# bench runs every scenario against redis-servers it starts itself (about
# 15 minutes with the Redlock section) and writes bench/results/REPORT.md
# and its charts.
bench:
	cd bench && go run . -out results

# bench-quick is a smoke run of a few minutes, written to the same place.
bench-quick:
	cd bench && go run . -quick -out results

.PHONY: verify

# verify is the fault suite's long mode: every backend through every
# nemesis for 20 s before and after each fault (about 15 minutes), writing
# verify/REPORT.md. The short mode (1 s) runs inside ./scripts/test.
verify:
	DLOCK_REQUIRE_SERVERS=1 DLOCK_JEPSEN_DURATION=20s DLOCK_JEPSEN_REPORT=$(CURDIR)/verify/REPORT.md \
		go -C internal/jepsen test -race -count=1 -timeout 120m -run TestJepsen -v .

.PHONY: fuzz

# fuzz runs each fuzz target for FUZZTIME (default 60s); ./scripts/test runs
# them over their seed corpus and testdata/ as regular tests.
FUZZTIME ?= 60s
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz

.PHONY: soak

# soak runs every backend (redis, postgres, mariadb, sqlite, zookeeper,
# etcd), one at a time, under ordinary sustained load for SOAK_DURATION
# each, with the server killed and restarted halfway, and writes
# soak/REPORT.md; it fails on leaks, unbounded server state, refused
# connections and throughput decay. The short mode (about 15 s per
# backend) runs inside ./scripts/test, under -race like every test.
# The long mode runs without the race detector, because it measures
# memory: the race runtime's own memory grows with the goroutines a
# process has ever started (a PostgreSQL Locker's worker went from 190
# to 449 MB of RSS in 90 s with a flat 9 MB Go heap under -race, and
# stayed at 37-39 MB without it), which would hide a real leak or fake one.
SOAK_DURATION ?= 8m
soak:
	DLOCK_REQUIRE_SERVERS=1 DLOCK_SOAK_DURATION=$(SOAK_DURATION) DLOCK_SOAK_REPORT=$(CURDIR)/soak/REPORT.md \
		go -C soak test -count=1 -timeout 180m -run TestSoak -v .
