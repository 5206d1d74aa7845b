# Benchmarks live in bench/, a module of their own so that the peer
# libraries (redsync, bsm/redislock) never enter dlock's go.mod.

.PHONY: bench bench-quick

# bench runs every scenario against a redis-server it starts itself
# (about 4 minutes) and writes bench/results/REPORT.md and its charts.
bench:
	cd bench && go run . -out results

# bench-quick is a smoke run of about a minute, written to the same place.
bench-quick:
	cd bench && go run . -quick -out results
