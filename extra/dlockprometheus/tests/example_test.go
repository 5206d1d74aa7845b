package dlockprometheus_test

import (
	"context"
	"log"
	"os"

	"github.com/dlock-go/dlock/extra/dlockprometheus"
	"github.com/dlock-go/dlock/memlock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// Example wires a Collector to a registry and to a Locker, takes a lock
// twice, and prints two of the metrics as a scrape shows them.
func Example() {
	c := dlockprometheus.New(nil)
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(c), served by promhttp.Handler()
	reg.MustRegister(c)

	l, err := memlock.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	l.AddHook(c.Hook())

	ctx := context.Background()
	for range 2 {
		k, err := l.TryAcquire(ctx, "report")
		if err != nil {
			log.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}

	text, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, "dlock_acquisitions_total", "dlock_held_locks")
	if err != nil {
		log.Fatal(err)
	}
	_, _ = os.Stdout.Write(text)
	// Output:
	// # HELP dlock_acquisitions_total Acquire and TryAcquire calls by outcome: acquired, not_acquired, canceled, error.
	// # TYPE dlock_acquisitions_total counter
	// dlock_acquisitions_total{backend="memory",outcome="acquired"} 2
	// dlock_acquisitions_total{backend="memory",outcome="canceled"} 0
	// dlock_acquisitions_total{backend="memory",outcome="error"} 0
	// dlock_acquisitions_total{backend="memory",outcome="not_acquired"} 0
	// # HELP dlock_held_locks Locks held now.
	// # TYPE dlock_held_locks gauge
	// dlock_held_locks{backend="memory"} 0
}
