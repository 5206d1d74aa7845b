package dlockprometheus_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/extra/dlockprometheus"
	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

// BenchmarkHookCost measures an uncontended TryAcquire and Release on
// memlock without hooks and with the Prometheus hook (by default, and with
// a name label).
func BenchmarkHookCost(b *testing.B) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
	for _, bc := range []struct {
		name string
		hook func() (hook.Hook, bool)
	}{
		{"none", func() (hook.Hook, bool) { return hook.Hook{}, false }},
		{"prometheus", func() (hook.Hook, bool) { return dlockprometheus.New(nil).Hook(), true }},
		{"prometheus-name", func() (hook.Hook, bool) {
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

// BenchmarkHookEvents measures the Prometheus hook's own work for one
// uncontended acquisition and its release (the events TryAcquire and
// Release report), without a Locker: the cost BenchmarkHookCost adds,
// less sensitive to a noisy machine.
func BenchmarkHookEvents(b *testing.B) {
	prefix := func(name string) string { p, _, _ := strings.Cut(name, "/"); return p }
	for _, bc := range []struct {
		name string
		opts *dlockprometheus.Options
	}{
		{"prometheus", nil},
		{"prometheus-name", &dlockprometheus.Options{NameLabel: prefix}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := dlockprometheus.New(bc.opts).Hook()
			ctx := b.Context()
			start := hook.AcquireStart{Backend: "memory", Name: "jobs/x", TTL: driver.DefaultTTL}
			done := hook.AcquireDone{AcquireStart: start, Outcome: hook.Acquired, Duration: 2000, Attempts: 1, Ahead: -1}
			rel := hook.Release{Backend: "memory", Name: "jobs/x", Held: 1000, Duration: 1000, Outcome: hook.Released}
			b.ReportAllocs()
			for b.Loop() {
				h.AcquireStart(ctx, start)
				h.AcquireDone(ctx, done)
				h.Released(ctx, rel)
			}
		})
	}
}
