package lazylog_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/clienttools/gateway/lazylog"
)

// TestSameOutput: a logger from With writes what Logger.With's would, with
// either of slog's handlers, through groups and further attributes.
func TestSameOutput(t *testing.T) {
	handlers := map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: dropTime})
		},
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: dropTime})
		},
	}
	uses := map[string]func(*slog.Logger){
		"a record":              func(l *slog.Logger) { l.Info("hello", "n", 1) },
		"below the level":       func(l *slog.Logger) { l.Debug("dropped", "n", 1) },
		"more attributes":       func(l *slog.Logger) { l.With("remote", "10.0.0.1:5").Warn("slow") },
		"a group":               func(l *slog.Logger) { l.WithGroup("call").Info("done", "id", "c1") },
		"an attribute and args": func(l *slog.Logger) { l.Error("failed", slog.Int("attempt", 2), "why", "timeout") },
	}
	args := []any{"session", "s-1", slog.Int("depth", 2), "odd"}
	for hn, newHandler := range handlers {
		for un, use := range uses {
			t.Run(hn+"/"+un, func(t *testing.T) {
				var want, got bytes.Buffer
				use(slog.New(newHandler(&want)).With(args...))
				use(lazylog.With(slog.New(newHandler(&got)), args...))
				if got.String() != want.String() {
					t.Errorf("wrote\n %q\nwant\n %q", got.String(), want.String())
				}
			})
		}
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// countingHandler counts the copies WithAttrs makes.
type countingHandler struct {
	slog.Handler
	mu    *sync.Mutex
	withs *int
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.mu.Lock()
	*h.withs++
	h.mu.Unlock()
	return countingHandler{h.Handler.WithAttrs(as), h.mu, h.withs}
}

// TestNoCopyUntilWritten: a logger that writes nothing above its level
// makes no copy of its handler, and one that writes makes one, however
// many goroutines write at once.
func TestNoCopyUntilWritten(t *testing.T) {
	var mu sync.Mutex
	withs := 0
	base := countingHandler{slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}), &mu, &withs}
	l := lazylog.With(slog.New(base), "session", "s-1")
	l.Info("below the level")
	if !l.Enabled(context.Background(), slog.LevelWarn) || l.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("Enabled is not the handler's")
	}
	if withs != 0 {
		t.Fatalf("%d copies before any record was written, want 0", withs)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { l.Warn("written") })
	}
	wg.Wait()
	if withs != 1 {
		t.Errorf("%d copies after records were written, want 1", withs)
	}
}

var sink *slog.Logger // kept, as a session keeps its logger

// BenchmarkWith: what a session's or a connection's logger costs when it
// never writes.
func BenchmarkWith(b *testing.B) {
	base := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = base.With("session", "k3JtQm9sX2FwcGxlLTEyMzQ1Njc4OQ")
		}
	})
	b.Run("lazylog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = lazylog.With(base, "session", "k3JtQm9sX2FwcGxlLTEyMzQ1Njc4OQ")
		}
	})
}
