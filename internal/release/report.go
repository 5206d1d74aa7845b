package main

import (
	"fmt"
	"sort"
)

// Targets of the publication test (issue 25).
const (
	// maxExtraSums is how many more modules a redislock-only program's
	// go.sum may hold than a bsm/redislock program's on the same go-redis.
	maxExtraSums = 3
	// maxGuardGrowth is how much larger a fence.Guard-only binary may be
	// than a root-only one.
	maxGuardGrowth = 1 << 20
)

// report prints the figures and returns the targets missed.
func (f figures) report() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("\n| program | go.sum modules | binary MB |\n|---|---|---|\n")
	for _, n := range names {
		fmt.Printf("| %s | %d | %.1f |\n", n, f[n].sumModules, float64(f[n].size)/(1<<20))
	}
	fmt.Println()
	var missed []string
	target := func(ok bool, format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		verdict := "ok  "
		if !ok {
			verdict = "FAIL"
			missed = append(missed, line)
		}
		fmt.Printf("%s %s\n", verdict, line)
	}
	if r, b, ok := f.pair("redislock", "bsm-redislock"); ok {
		target(r.sumModules <= b.sumModules+maxExtraSums, "redislock-only go.sum: %d modules, bsm/redislock %d, target at most %d",
			r.sumModules, b.sumModules, b.sumModules+maxExtraSums)
	}
	if g, r, ok := f.pair("fence-guard", "root"); ok {
		target(g.size <= r.size+maxGuardGrowth, "fence.Guard-only binary: %.2f MB, root-only %.2f MB, target at most +1 MB",
			float64(g.size)/(1<<20), float64(r.size)/(1<<20))
	}
	f.notLinked(target, "postgres", "github.com/go-sql-driver/mysql")
	f.notLinked(target, "mysql", "github.com/jackc/pgx/v5")
	f.notLinked(target, "sqlite", "github.com/go-sql-driver/mysql", "github.com/jackc/pgx/v5")
	return missed
}

func (f figures) pair(a, b string) (built, built, bool) {
	x, ok1 := f[a]
	y, ok2 := f[b]
	return x, y, ok1 && ok2
}

// notLinked checks that the program links none of mods.
func (f figures) notLinked(target func(bool, string, ...any), program string, mods ...string) {
	b, ok := f[program]
	if !ok {
		return
	}
	for _, m := range mods {
		target(!b.linked[m], "%s-only binary links %s: %v, target false", program, m, b.linked[m])
	}
}
