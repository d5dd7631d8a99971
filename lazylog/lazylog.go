package lazylog

import (
	"context"
	"log/slog"
	"sync"
)

// With returns l with args (as Logger.With takes them) added to every
// record it writes.
func With(l *slog.Logger, args ...any) *slog.Logger {
	if len(args) == 0 {
		return l
	}
	return slog.New(&handler{parent: l.Handler(), args: args})
}

// handler defers parent.WithAttrs until a record or a derived handler
// needs it.
type handler struct {
	parent slog.Handler
	args   []any
	once   sync.Once
	built  slog.Handler
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.parent.Enabled(ctx, level) // attributes never change the level
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.handler().WithAttrs(attrs)
}

func (h *handler) WithGroup(name string) slog.Handler {
	return h.handler().WithGroup(name)
}

// handler is the parent with the attributes, made once.
func (h *handler) handler() slog.Handler {
	h.once.Do(func() {
		// Logger.With's own conversion of key-value pairs to attributes.
		h.built = slog.New(h.parent).With(h.args...).Handler()
		h.args = nil
	})
	return h.built
}
