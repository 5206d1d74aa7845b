package dlockprometheus_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/extra/dlockprometheus"
	"github.com/dlock-go/dlock/memlock"
)

// BenchmarkHookCost measures an uncontended TryAcquire and Release on
// memlock without hooks and with the Prometheus hook (by default, and with
// a name label).
func BenchmarkHookCost(b *testing.B) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
	for _, bc := range []struct {
		name string
		hook func() (dlock.Hook, bool)
	}{
		{"none", func() (dlock.Hook, bool) { return dlock.Hook{}, false }},
		{"prometheus", func() (dlock.Hook, bool) { return dlockprometheus.New(nil).Hook(), true }},
		{"prometheus-name", func() (dlock.Hook, bool) {
			return dlockprometheus.New(&dlockprometheus.Options{NameLabel: prefix}).Hook(), true
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, _ := memlock.New(nil)
			defer l.Close()
			if h, ok := bc.hook(); ok {
				l.AddHook(h)
			}
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				k, err := l.TryAcquire(ctx, "jobs/x")
				if err != nil {
					b.Fatalf("TryAcquire = %v", err)
				}
				if err := k.Release(ctx); err != nil {
					b.Fatalf("Release = %v", err)
				}
			}
		})
	}
}
