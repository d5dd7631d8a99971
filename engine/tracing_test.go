package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/clienttools/gateway/engine/model"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestSpans: one user message whose model turn calls a worker tool and a
// client tool (its first attempt times out, the second is answered) makes
// the GenAI conventions' tree: invoke_agent over two chat spans and two
// execute_tool spans, each call with a child span per attempt; the worker's
// request runs in its attempt's span.
func TestSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	var workerSpan trace.SpanContext
	w := &testWorker{
		agent: engine.AgentConfig{Tools: []engine.AgentTool{
			{Name: "lookup"},
			{Name: "get_time", Handler: engine.HandlerClient, Retry: &engine.RetryPolicy{Attempts: 2, Timeout: "1s", Backoff: "1s"}},
		}},
		execute: func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			workerSpan = trace.SpanContextFromContext(ctx)
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
		},
	}
	m := callsThenSummary(use("call_1", "lookup", `{}`), use("call_2", "get_time", `{}`))
	b := newBrowser()
	h := setup(t, w, m, engine.Options{TracerProvider: tp}, b)
	h.send("go")
	first := recv(t, b.calls, "the first get_time attempt")
	h.clock.Advance(1500 * time.Millisecond) // past its 1 s timeout
	h.waitType(engine.EventToolRetrying)
	// Past the backoff (at most 1 s) in small steps, so attempt 2, whose
	// timer is armed when it starts, is not timed out by the same step.
	var second engine.ClientCall
	for got := false; !got; {
		h.clock.Advance(100 * time.Millisecond)
		select {
		case second = <-b.calls:
			got = true
		case <-time.After(20 * time.Millisecond):
		}
	}
	if first.Attempt != 1 || second.Attempt != 2 {
		t.Fatalf("attempts %d, %d", first.Attempt, second.Attempt)
	}
	h.answer(engine.ToolResult{ID: "call_2", Attempt: 2, Result: json.RawMessage(`{"time":"12:00"}`)})
	h.waitFor("the summary", func(f frame) bool {
		return f.Type == engine.EventMessage && f.msg(t).Content != "" && f.msg(t).Role == "assistant"
	})
	h.waitIdle()

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	agent := one(t, byName, "invoke_agent")
	if attr(agent, "gen_ai.operation.name") != "invoke_agent" || attr(agent, "gen_ai.conversation.id") != h.s.ID() {
		t.Errorf("invoke_agent attributes %v", agent.Attributes)
	}
	chats := byName["chat fake-model"]
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2 (spans: %v)", len(chats), names(spans))
	}
	for _, c := range chats {
		if c.Parent.SpanID() != agent.SpanContext.SpanID() || attr(c, "gen_ai.operation.name") != "chat" || attr(c, "gen_ai.request.model") != "fake-model" {
			t.Errorf("chat span %v under %v", c.Attributes, c.Parent.SpanID())
		}
	}
	lookup, getTime := one(t, byName, "execute_tool lookup"), one(t, byName, "execute_tool get_time")
	for _, c := range []tracetest.SpanStub{lookup, getTime} {
		if c.Parent.SpanID() != agent.SpanContext.SpanID() {
			t.Errorf("%s is not under invoke_agent", c.Name)
		}
		if attr(c, "gen_ai.operation.name") != "execute_tool" || attr(c, "gen_ai.tool.type") != "function" || attr(c, "gen_ai.conversation.id") != h.s.ID() {
			t.Errorf("%s attributes %v", c.Name, c.Attributes)
		}
	}
	if attr(lookup, "gen_ai.tool.call.id") != "call_1" || attr(lookup, "clienttools.tool.handler") != "worker" || attr(getTime, "clienttools.tool.handler") != "client" {
		t.Errorf("call attributes: %v, %v", lookup.Attributes, getTime.Attributes)
	}
	if attr(getTime, "clienttools.tool.attempts") != "2" || getTime.Status.Code == codes.Error {
		t.Errorf("get_time: %v, status %v; want 2 attempts, not an error", getTime.Attributes, getTime.Status)
	}
	var attempts []tracetest.SpanStub
	for _, a := range byName["attempt"] {
		if a.Parent.SpanID() == getTime.SpanContext.SpanID() {
			attempts = append(attempts, a)
		}
		if a.Parent.SpanID() == lookup.SpanContext.SpanID() && a.SpanContext.SpanID() != workerSpan.SpanID() {
			t.Errorf("the worker ran in span %v, not its attempt's %v", workerSpan.SpanID(), a.SpanContext.SpanID())
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("get_time has %d attempt spans, want 2", len(attempts))
	}
	if attr(attempts[0], "clienttools.tool.attempt") != "1" || attr(attempts[0], "error.type") != "timeout" || attr(attempts[0], "clienttools.page") != h.page.ID() {
		t.Errorf("the first attempt: %v", attempts[0].Attributes)
	}
	if attr(attempts[1], "clienttools.tool.attempt") != "2" || attr(attempts[1], "error.type") != "" {
		t.Errorf("the second attempt: %v", attempts[1].Attributes)
	}
}

func one(t *testing.T, byName map[string][]tracetest.SpanStub, name string) tracetest.SpanStub {
	t.Helper()
	if len(byName[name]) != 1 {
		t.Fatalf("%d %q spans, want 1", len(byName[name]), name)
	}
	return byName[name][0]
}

// attr is a span attribute's value as text; "" when absent.
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestSpansOnceGlobalProviderSet: an engine given no TracerProvider makes
// no spans while otel's global provider is unset, and starts making them
// (to that provider) as soon as one is set, as it did when it went through
// the global no-op's delegation.
func TestSpansOnceGlobalProviderSet(t *testing.T) {
	if got := fmt.Sprintf("%T", otel.GetTracerProvider()); got != "*global.tracerProvider" {
		t.Skipf("the global tracer provider was set before this test (%s); it runs once a process", got)
	}
	m := callsThenSummary(use("call_1", "lookup", `{}`))
	w := &testWorker{
		agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}},
		execute: func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
		},
	}
	h := setup(t, w, m, engine.Options{})
	h.send("go")
	h.waitIdle()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans before any provider was set", n)
	}
	otel.SetTracerProvider(tp)
	h.send("again")
	h.waitIdle()
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{"attempt", "chat fake-model", "chat fake-model", "execute_tool lookup", "invoke_agent"}; !slices.Equal(names, want) {
		t.Errorf("spans after the global provider was set: %q, want %q", names, want)
	}
}

// TestSpansSayNoFailureWhereNoneWas: a turn the user stopped, and a call
// whose session left this process (it goes on where the session loads
// next), end their spans with no error status; a tool the model made up
// is named as the metrics name it, (undeclared), not by its made-up name.
func TestSpansSayNoFailureWhereNoneWas(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_time", Handler: engine.HandlerClient}}}}
	stop := make(chan struct{})
	var turns atomic.Int32
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		switch turns.Add(1) {
		case 1: // stopped by the user
			close(stop)
			<-ctx.Done()
			return model.Response{StopReason: model.StopCancelled}, ctx.Err()
		case 2:
			return model.Response{ToolUses: []model.ToolUse{{ID: "call_1", Name: "ghost_user_text"}, {ID: "call_2", Name: "get_time", Arguments: "{}"}}, StopReason: model.StopToolUse}, nil
		default:
			return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
		}
	}}
	b := newBrowser()
	h := setup(t, w, m, engine.Options{TracerProvider: tp}, b)
	h.send("long")
	<-stop
	if err := h.s.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitIdle()
	h.send("tools")
	recv(t, b.calls, "get_time delivered")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range exp.GetSpans() {
		got = append(got, s.Name)
		switch {
		case s.Name == "execute_tool (undeclared)":
			if attr(s, "gen_ai.tool.name") != "(undeclared)" {
				t.Errorf("the made-up tool's span: gen_ai.tool.name %q", attr(s, "gen_ai.tool.name"))
			}
		case strings.Contains(s.Name, "ghost"):
			t.Errorf("a span named by the model's made-up tool: %q", s.Name)
		case s.Name == "chat fake-model" && strings.Contains(attr(s, "gen_ai.response.finish_reasons"), "cancelled"),
			s.Name == "execute_tool get_time", s.Name == "attempt":
			if s.Status.Code == codes.Error {
				t.Errorf("span %q: error status %q, where nothing failed", s.Name, s.Status.Description)
			}
		}
	}
	if !slices.Contains(got, "execute_tool (undeclared)") || !slices.Contains(got, "execute_tool get_time") {
		t.Errorf("spans %q", got)
	}
}
