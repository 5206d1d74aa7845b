package hook

import (
	"context"
	"log/slog"

	"github.com/dlock-go/dlock/internal/lockmode"
)

// Slog returns a Hook that logs a Locker's work to logger (nil means
// slog.Default()): losses and renewals that failed at Warn, every other
// event at Debug. Each record carries the backend and, where there is
// one, the lock's name, owner and fencing token. Names are logged as they
// are: do not enable Debug on a shared log if names carry data its
// readers must not see.
//
// Records use the context of the call they describe (for a loss, the
// context that acquired the lock), so a handler can add its trace ids.
func Slog(logger *slog.Logger) Hook {
	if logger == nil {
		logger = slog.Default()
	}
	s := slogHook{logger}
	return Hook{
		AcquireStart: s.acquireStart,
		AcquireDone:  s.acquireDone,
		Reentered:    s.reentered,
		Renewed:      s.renewed,
		Lost:         s.lost,
		Released:     s.released,
	}
}

// slogHook holds the logger whose methods make the Hook Slog returns.
type slogHook struct {
	logger *slog.Logger
}

func (s slogHook) debug(ctx context.Context) bool {
	return s.logger.Enabled(ctx, slog.LevelDebug)
}

func (s slogHook) acquireStart(ctx context.Context, e AcquireStart) context.Context {
	if s.debug(ctx) {
		s.logger.LogAttrs(ctx, slog.LevelDebug, "dlock: acquiring",
			slog.String("backend", e.Backend), slog.String("name", e.Name), slog.Bool("wait", e.Wait),
			slog.String("mode", lockmode.String(e.Shared, e.Limit)), slog.Duration("ttl", e.TTL))
	}
	return nil
}

func (s slogHook) acquireDone(ctx context.Context, e AcquireDone) {
	if !s.debug(ctx) {
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
	s.logger.LogAttrs(ctx, slog.LevelDebug, "dlock: acquire", attrs...)
}

func (s slogHook) reentered(ctx context.Context, e Reentry) {
	if s.debug(ctx) {
		s.logger.LogAttrs(ctx, slog.LevelDebug, "dlock: re-entered",
			slog.String("backend", e.Backend), slog.String("name", e.Name), slog.String("owner", e.Owner),
			slog.Uint64("fence", e.Fence), slog.Int("handles", e.Handles))
	}
}

func (s slogHook) renewed(e Renewal) {
	ctx := context.Background()
	level := slog.LevelDebug
	if e.NotHeld > 0 || e.Failed > 0 {
		level = slog.LevelWarn
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("backend", e.Backend), slog.Int("size", e.Size),
		slog.Int("renewed", e.Renewed), slog.Int("not_held", e.NotHeld), slog.Int("failed", e.Failed),
		slog.Duration("took", e.Duration)}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	s.logger.LogAttrs(ctx, level, "dlock: renewal", attrs...)
}

func (s slogHook) lost(ctx context.Context, e Loss) {
	attrs := []slog.Attr{slog.String("backend", e.Backend), slog.String("name", e.Name), slog.String("owner", e.Owner),
		slog.Uint64("fence", e.Fence), slog.String("reason", e.Reason.String()), slog.Duration("held", e.Held)}
	if e.Cause != nil {
		attrs = append(attrs, slog.String("cause", e.Cause.Error()))
	}
	s.logger.LogAttrs(ctx, slog.LevelWarn, "dlock: lock lost", attrs...)
}

func (s slogHook) released(ctx context.Context, e Release) {
	if !s.debug(ctx) {
		return
	}
	attrs := []slog.Attr{slog.String("backend", e.Backend), slog.String("name", e.Name),
		slog.String("owner", e.Owner), slog.Uint64("fence", e.Fence), slog.String("outcome", e.Outcome.String()),
		slog.Duration("held", e.Held), slog.Duration("took", e.Duration), slog.Bool("closed", e.Closed)}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	s.logger.LogAttrs(ctx, slog.LevelDebug, "dlock: released", attrs...)
}
