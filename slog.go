package dlock

import (
	"context"
	"log/slog"
)

// NewSlogHook returns a Hook that logs a Locker's work to logger (nil
// means slog.Default()): losses and renewals that failed at Warn, every
// other event at Debug. Each record carries the backend and, where there
// is one, the lock's name, owner and fencing token. Names are logged as
// they are: do not enable Debug on a shared log if names carry data its
// readers must not see.
//
// Records use the context of the call they describe (for a loss, the
// context that acquired the lock), so a handler can add its trace ids.
func NewSlogHook(logger *slog.Logger) Hook {
	if logger == nil {
		logger = slog.Default()
	}
	debug := func(ctx context.Context) bool { return logger.Enabled(ctx, slog.LevelDebug) }
	return Hook{
		AcquireStart: func(ctx context.Context, e AcquireStartEvent) context.Context {
			if debug(ctx) {
				logger.LogAttrs(ctx, slog.LevelDebug, "dlock: acquiring",
					slog.String("backend", e.Backend), slog.String("name", e.Name), slog.Bool("wait", e.Wait),
					slog.String("mode", modeString(e.Shared, e.Limit)), slog.Duration("ttl", e.TTL))
			}
			return nil
		},
		AcquireDone: func(ctx context.Context, e AcquireDoneEvent) {
			if !debug(ctx) {
				return
			}
			attrs := []slog.Attr{slog.String("backend", e.Backend), slog.String("name", e.Name),
				slog.String("outcome", e.Outcome.String()), slog.Duration("took", e.Duration),
				slog.Int("attempts", e.Attempts), slog.Bool("contended", e.Contended)}
			if e.Outcome == Acquired {
				attrs = append(attrs, slog.String("owner", e.Owner), slog.Uint64("fence", e.Fence))
			}
			if e.Ahead >= 0 {
				attrs = append(attrs, slog.Int("ahead", e.Ahead))
			}
			if e.Err != nil {
				attrs = append(attrs, slog.String("error", e.Err.Error()))
			}
			logger.LogAttrs(ctx, slog.LevelDebug, "dlock: acquire", attrs...)
		},
		Reentered: func(ctx context.Context, e ReentryEvent) {
			if debug(ctx) {
				logger.LogAttrs(ctx, slog.LevelDebug, "dlock: re-entered",
					slog.String("backend", e.Backend), slog.String("name", e.Name), slog.String("owner", e.Owner),
					slog.Uint64("fence", e.Fence), slog.Int("handles", e.Handles))
			}
		},
		Renewed: func(e RenewalEvent) {
			ctx := context.Background()
			level := slog.LevelDebug
			if e.NotHeld > 0 || e.Failed > 0 {
				level = slog.LevelWarn
			}
			if !logger.Enabled(ctx, level) {
				return
			}
			attrs := []slog.Attr{slog.String("backend", e.Backend), slog.Int("size", e.Size),
				slog.Int("renewed", e.Renewed), slog.Int("not_held", e.NotHeld), slog.Int("failed", e.Failed),
				slog.Duration("took", e.Duration)}
			if e.Err != nil {
				attrs = append(attrs, slog.String("error", e.Err.Error()))
			}
			logger.LogAttrs(ctx, level, "dlock: renewal", attrs...)
		},
		Lost: func(ctx context.Context, e LossEvent) {
			logger.LogAttrs(ctx, slog.LevelWarn, "dlock: lock lost",
				slog.String("backend", e.Backend), slog.String("name", e.Name), slog.String("owner", e.Owner),
				slog.Uint64("fence", e.Fence), slog.String("reason", e.Reason.String()),
				slog.Duration("held", e.Held), slog.String("cause", e.Cause.Error()))
		},
		Released: func(ctx context.Context, e ReleaseEvent) {
			if !debug(ctx) {
				return
			}
			attrs := []slog.Attr{slog.String("backend", e.Backend), slog.String("name", e.Name),
				slog.String("owner", e.Owner), slog.Uint64("fence", e.Fence), slog.String("outcome", e.Outcome.String()),
				slog.Duration("held", e.Held), slog.Duration("took", e.Duration), slog.Bool("closed", e.Closed)}
			if e.Err != nil {
				attrs = append(attrs, slog.String("error", e.Err.Error()))
			}
			logger.LogAttrs(ctx, slog.LevelDebug, "dlock: released", attrs...)
		},
	}
}
