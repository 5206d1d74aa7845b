package dlock_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/dlock-go/dlock/hook"
	"github.com/dlock-go/dlock/memlock"
)

// BenchmarkHookCost measures an uncontended TryAcquire+Release on memlock
// without hooks, with a Hook whose fields are all nil, and with the slog
// adapter at Info (nothing logged on this path) and at Debug (four records
// a cycle, to io.Discard). The OpenTelemetry and Prometheus adapters have
// the same benchmark in their modules.
func BenchmarkHookCost(b *testing.B) {
	cases := []struct {
		name string
		hook *hook.Hook
	}{
		{"none", nil},
		{"empty", &hook.Hook{}},
		{"slog-info", ptr(hook.Slog(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))))},
		{"slog-debug", ptr(hook.Slog(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))))},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			l, err := memlock.New(nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if c.hook != nil {
				l.AddHook(*c.hook)
			}
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				k, err := l.TryAcquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				k.Release(ctx)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
