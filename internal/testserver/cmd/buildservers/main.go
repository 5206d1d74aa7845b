// Command buildservers builds every server that dlock's tests build from
// Go modules (testserver.GoServers) into the cache, so that ./scripts/test
// pays for the builds once, before the tests and outside their timeouts.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/dlock-go/dlock/internal/testserver"
)

func main() {
	for _, s := range testserver.GoServers() {
		start := time.Now()
		bin, err := s.Path()
		if err != nil {
			fmt.Fprintf(os.Stderr, "buildservers: %s %s: %v\n", s.Name, s.Version, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "buildservers: %s %s at %s (%v)\n", s.Name, s.Version, bin, time.Since(start).Round(time.Second))
	}
}
