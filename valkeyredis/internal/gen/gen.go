// Command gen writes valkeyredis from rueidisredis: valkey-go is a fork of
// rueidis with the same API under other names, so the adapter (and its
// tests) is written once, for rueidis, and this rewrite gives valkey-go's.
// Run it with go generate in valkeyredis; the test module checks that the
// files are current (gen -check).
//
// Usage:
//
//	go run ./internal/gen [-check] [-from ../rueidisredis] [-to .]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dlock-go/dlock/valkeyredis/internal/gen/rewrite"
)

func main() {
	check := flag.Bool("check", false, "report files that differ from what would be written, and write nothing")
	from := flag.String("from", "../rueidisredis", "the rueidis adapter's directory")
	to := flag.String("to", ".", "the valkey-go adapter's directory")
	flag.Parse()
	stale, err := rewrite.Tree(*from, *to, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintln(os.Stderr, "gen: stale (run go generate in valkeyredis):", stale)
		os.Exit(1)
	}
}
