package sqllock_test

import "github.com/dlock-go/dlock/internal/testworker"

// runWorker returns at once in the test process; in a worker process
// (see internal/testworker) it runs the worker and exits.
func runWorker() {
	testworker.Run(map[string]testworker.Func{"hold": testworker.Hold, "count": testworker.Count, "handoff": handoffWorker, "tokenhold": testworker.TokenHold})
}
