// Package lazylog gives a logger its attributes only when it first writes.
//
// slog's Logger.With formats its attributes into a copy of the handler at
// once: a few hundred bytes for each session and each connection, kept for
// as long as they live, though most of them never write a record above the
// level. With keeps the attributes instead, and makes that copy when the
// first record gets through the handler's level (or when a caller adds
// attributes or a group to it). What is written is what Logger.With
// would have written, with two differences a caller should know: a
// slog.LogValuer among the attributes is resolved at that first write,
// not at With, so give it values that do not change; and the level is
// asked of the handler without the attributes, as slog's own handlers
// answer it (a handler that filters on attributes would not).
//
// Concurrency: a logger from With may be used from any goroutine, as any
// slog.Logger.
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
