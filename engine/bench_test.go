package engine

// Benchmarks of the engine's hot paths. They report time and allocations
// only; the figures live in docs/benchmarks.md, never in assertions.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine/model"
)

// benchEchoSchema is the bench agent's echo input, as cmd/gatewaybench has it.
const benchEchoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`

// BenchmarkEncodeEvent encodes the session events of one client-tool turn
// as the event log does for every event (encodeEvent).
func BenchmarkEncodeEvent(b *testing.B) {
	input := ToolInput{Status: InputValid, Value: []byte(`{"text":"echo 1000"}`)}
	events := []struct {
		name    string
		typ     string
		payload any
	}{
		{"model.delta", EventModelDelta, ModelDeltaEvent{Text: "Hello, wor"}},
		{"tool.started", EventToolStarted, ToolStartedEvent{ID: "toolu_1000", Name: "echo", Arguments: `{"text":"echo 1000"}`,
			Input: input, Handler: HandlerClient, Attempt: 1, Attempts: 1, Deadline: "2026-01-02T03:04:05.000Z"}},
		{"tool.finished", EventToolFinished, ToolFinishedEvent{ID: "toolu_1000", OK: true, Name: "echo", Result: `{"text":"echo 1000"}`}},
		{"message", EventMessage, MessageEvent{Message: Message{Role: model.RoleAssistant, Content: "done"}}},
		{"session.idle", EventSessionIdle, struct{}{}},
	}
	for _, ev := range events {
		b.Run(ev.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeEvent(ev.typ, 42, "", ev.payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClientCallFrame encodes the tool.call delivery of a client call.
func BenchmarkClientCallFrame(b *testing.B) {
	c := ClientCall{ID: "toolu_1000", Name: "echo", Arguments: `{"text":"echo 1000"}`,
		Input:   ToolInput{Status: InputValid, Value: []byte(`{"text":"echo 1000"}`)},
		Attempt: 1, Attempts: 1, Deadline: "2026-01-02T03:04:05.000Z"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeFrame(FrameToolCall, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateInput validates a call's arguments against its tool's
// compiled input schema (classifyInput), as startCall does for every call:
// the name for it.
func BenchmarkValidateInput(b *testing.B) {
	schema, err := compileSchema("echo", "input", []byte(benchEchoSchema))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name, args string
		want       string
	}{
		{"valid", `{"text":"echo 1000"}`, InputValid},
		{"invalid", `{"text":1000}`, InputInvalid},
		{"malformed", `{"text":`, InputMalformed},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := classifyInput(c.args, schema); got.Status != c.want {
					b.Fatalf("status %q, want %q", got.Status, c.want)
				}
			}
		})
	}
	b.Run("valid/no-schema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			classifyInput(`{"text":"echo 1000"}`, nil)
		}
	})
}

// BenchmarkPublishFanOut publishes model.delta events on a live session
// with 1 and 10 pages, each read by its own goroutine as a gateway's writer
// does. An op is one delta published, stored and taken by every page: the
// timer runs until the last page has them all.
func BenchmarkPublishFanOut(b *testing.B) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("pages=%d", n), func(b *testing.B) {
			s := benchSession(b)
			// A buffer deep enough that a page running behind the
			// publisher on a busy machine is never dropped.
			const buffer = 1 << 16
			var wg sync.WaitGroup
			pages := make([]*Page, n)
			for i := range pages {
				p, err := s.Attach(context.Background(), AttachOptions{After: s.LastSeq(), Buffer: buffer})
				if err != nil {
					b.Fatal(err)
				}
				pages[i] = p
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.ReportAllocs()
			b.ResetTimer()
			for _, p := range pages {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ev := range p.Frames(ctx) {
						if ev.Type == "bench.end" {
							return
						}
					}
				}()
			}
			delta := ModelDeltaEvent{Text: "Hello, wor"}
			for i := 0; i < b.N; i++ {
				s.publish(EventModelDelta, delta)
			}
			s.publish("bench.end", struct{}{})
			wg.Wait()
			b.StopTimer()
			cancel()
			for i, p := range pages {
				if err := p.Err(); err != nil {
					b.Fatalf("page %d: %v", i, err)
				}
				p.Detach()
			}
		})
	}
}

// benchSession opens a session on an engine that ends with the benchmark.
func benchSession(b *testing.B) *Session {
	b.Helper()
	idle := model.Func(func(context.Context, model.Request, func(string)) (model.Response, error) {
		return model.Response{StopReason: model.StopEndTurn}, nil
	})
	e, err := New(Options{
		Worker: &ToolWorker{Agent: AgentConfig{Model: "bench"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return idle, nil }),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	s, err := e.Open(context.Background(), OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return s
}

// BenchmarkWorkerToolCall is the engine's whole path of one worker tool
// call, the model excluded: a user message, the worker's decision to call
// echo (a tool.call action), input validation, the tool.execute on its own
// goroutine, the result checked against the output schema, tool.finished,
// every step stored (memory store) and published to one page, up to
// session.idle. An op is one message and its call.
func BenchmarkWorkerToolCall(b *testing.B) {
	var n int
	worker := WorkerFunc(func(ctx context.Context, req DecideRequest) (Decision, error) {
		switch t := req.Trigger.(type) {
		case SessionStart:
			return Decision{Agent: &AgentConfig{Model: "bench", Tools: []AgentTool{{Name: "echo",
				Input: []byte(benchEchoSchema), Output: []byte(benchEchoSchema)}}}}, nil
		case UserMessage:
			n++ // the session's goroutine: one trigger at a time
			return Decision{Actions: []Action{ToolCall{ID: fmt.Sprintf("call_%d", n), Name: "echo",
				Arguments: []byte(`{"text":"echo 1000"}`)}}}, nil
		case ToolExecute:
			return Decision{Actions: []Action{ToolResult{Result: t.Input.Value}}}, nil
		}
		return Decision{}, nil // tool.finished: no model turn
	})
	e, err := New(Options{Worker: worker, Logger: slog.New(slog.DiscardHandler), Retain: -1,
		// The model is never prompted: the worker decides every step.
		Models: model.ResolverFunc(func(string) (model.Model, error) {
			return model.Func(func(context.Context, model.Request, func(string)) (model.Response, error) {
				return model.Response{}, fmt.Errorf("the model is not part of this benchmark")
			}), nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	s, err := e.Open(context.Background(), OpenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Attach(context.Background(), AttachOptions{After: s.LastSeq(), Buffer: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Detach()
	var frames []Event
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Send(context.Background(), "go"); err != nil {
			b.Fatal(err)
		}
		for idle := false; !idle; {
			<-p.Ready()
			frames = p.Take(frames[:0])
			for _, ev := range frames {
				if ev.Type == EventToolFinished && !bytes.Contains(ev.Frame, []byte(`"ok":true`)) {
					b.Fatalf("the call failed: %s", ev.Frame)
				}
				idle = idle || ev.Type == EventSessionIdle
			}
		}
	}
}

// BenchmarkMemoryStoreSummaries lists a browser's 20 chats among 100,000
// sessions (GET /sessions on --store memory), while the store's lock is
// held against every Summarize.
func BenchmarkMemoryStoreSummaries(b *testing.B) {
	s := NewMemoryStore()
	ctx := context.Background()
	now := time.Now()
	for i := range 100_000 {
		owner := fmt.Sprintf("browser%d", 1+i%5000)
		if i < 20 {
			owner = "browser0"
		}
		if err := s.Summarize(ctx, Summary{ID: fmt.Sprintf("s%06d", i), Owner: owner, Created: now, Updated: now}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if got, err := s.Summaries(ctx, "browser0"); err != nil || len(got) != 20 {
			b.Fatalf("listed %d, %v; want 20", len(got), err)
		}
	}
}
