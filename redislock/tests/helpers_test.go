package redislock_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// containsField reports whether a CLIENT LIST line has the field=value
// prefix f among its space-separated fields.
func containsField(line, f string) bool {
	for _, field := range strings.Fields(line) {
		if strings.HasPrefix(field, f) {
			return true
		}
	}
	return false
}

// contend runs goroutines goroutines on each of ls, each taking name
// rounds times in turn (Acquire, sleep hold, Release), and waits for all.
func contend(t *testing.T, ls []*dlock.Locker, name string, goroutines, rounds int, hold time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for _, l := range ls {
		for range goroutines {
			wg.Go(func() {
				for range rounds {
					k, err := l.Acquire(t.Context(), name)
					if err != nil {
						t.Errorf("Acquire(%q) = %v", name, err)
						return
					}
					if hold > 0 {
						time.Sleep(hold)
					}
					k.Release(t.Context())
				}
			})
		}
	}
	wg.Wait()
}

// newLockers returns n Lockers on client, closed when the test ends.
func newLockers(t *testing.T, client redis.UniversalClient, n int) []*dlock.Locker {
	t.Helper()
	ls := make([]*dlock.Locker, n)
	for i := range ls {
		ls[i] = newLocker(t, client)
	}
	return ls
}
