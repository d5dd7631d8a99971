package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine/model"
)

// TestLoadedCallIsOnTheProcessClock: a call loaded from the store has its
// deadline, and its attempt's start, on the loading process's clock (a
// monotonic reading): read back from the store they had the wall clock's
// alone, and a step of it (NTP) after the load moved what a progress report
// did (a report ignored after a step back, an attempt timed out at the
// report after a step forward). The fake clock has no monotonic reading,
// so this runs on the real one.
func TestLoadedCallIsOnTheProcessClock(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore()
	agent := AgentConfig{Model: "m", Tools: []AgentTool{{Name: "confirm", Handler: HandlerClient, Retry: &RetryPolicy{Timeout: "1h"}}}}
	confirm := model.Func(func(ctx context.Context, req model.Request, _ func(string)) (model.Response, error) {
		return model.Response{StopReason: model.StopToolUse, ToolUses: []model.ToolUse{{ID: "call_1", Name: "confirm", Arguments: `{}`}}}, nil
	})
	start := func() *Engine {
		e, err := New(Options{Worker: &ToolWorker{Agent: agent}, Store: store, Retain: -1,
			Models: model.ResolverFunc(func(string) (model.Model, error) { return confirm, nil }), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e1 := start()
	s, err := e1.Open(ctx, OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Attach(ctx, AttachOptions{Tools: []string{"confirm"}, Buffer: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	frames, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	for ev := range p.Frames(frames) {
		if ev.Type == FrameToolCall {
			break
		}
	}
	p.Detach()
	if err := e1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	e2 := start()
	defer e2.Close(ctx)
	s2, err := e2.Load(ctx, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	err = s2.do(ctx, func() error {
		c := s2.calls["call_1"]
		switch {
		case c == nil:
			t.Error("the call was not loaded")
		case c.deadline == c.deadline.Round(0):
			t.Errorf("the loaded deadline %v has no monotonic reading", c.deadline)
		case c.attemptStarted == c.attemptStarted.Round(0):
			t.Errorf("the loaded attempt's start %v has no monotonic reading", c.attemptStarted)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
