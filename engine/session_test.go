package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// weatherTool is the seed's get_weather as an engine.Tool.
func weatherTool() engine.Tool {
	forecasts := map[string]string{"San Francisco": "foggy", "Tokyo": "clear"}
	return engine.Tool{
		Name:        "get_weather",
		Description: "Get the weather for a city.",
		Input:       engine.Schema(weatherInput),
		Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct{ City string }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			sky, ok := forecasts[in.City]
			if !ok {
				return nil, fmt.Errorf("No forecast for %s.", in.City)
			}
			return fmt.Sprintf("It's %s in %s.", sky, in.City), nil
		},
	}
}

// recordingToolWorker wraps a ToolWorker and records every request.
func recordingToolWorker(w *engine.ToolWorker) *testWorker {
	tw := &testWorker{}
	tw.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		return w.Decide(ctx, req)
	}
	tw.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
		return w.Decide(ctx, engine.DecideRequest{Trigger: t, Proposed: proposed})
	}
	return tw
}

// TestLoopWithProposals: a worker that runs its tool and otherwise returns
// proposed gets the whole loop: message, model, tool call, result,
// re-prompt, idle. Each proposal is the one DESIGN.md's trigger table gives.
func TestLoopWithProposals(t *testing.T) {
	m := callsThenSummary(use("call_1", "get_weather", `{"city":"Tokyo"}`))
	w := recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}, Tools: []engine.Tool{weatherTool()}})
	h := setup(t, w, m, engine.Options{})
	h.send("What's the weather in Tokyo?")
	h.waitIdle()

	wantEvents := []string{
		"session.idle",
		"message", "model.finished", "message", "tool.started", "tool.finished", "message",
		"model.delta", "model.finished", "message", "session.idle",
	}
	var got []string
	for _, f := range h.seen {
		got = append(got, f.Type)
	}
	if !slices.Equal(got, wantEvents) {
		t.Errorf("events:\n got %v\nwant %v", got, wantEvents)
	}

	// Every trigger, in order, with the proposal it came with.
	want := []struct{ trigger, proposed string }{
		{`{"type":"session.start","session":"` + h.s.ID() + `"}`, `{}`},
		{`{"type":"message","message":{"role":"user","content":"What's the weather in Tokyo?"}}`,
			`{"actions":[{"type":"message.append","message":{"role":"user","content":"What's the weather in Tokyo?"}},{"type":"model.prompt"}]}`},
		{`{"type":"model.finished","message":{"role":"assistant","toolUses":[{"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}]},"stopReason":"tool_use","usage":{"inputTokens":0,"outputTokens":0}}`,
			`{"actions":[{"type":"message.append","message":{"role":"assistant","toolUses":[{"id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}"}]}},{"type":"tool.call","id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}","handler":"worker"}]}`},
		{`{"type":"tool.execute","id":"call_1","name":"get_weather","arguments":"{\"city\":\"Tokyo\"}","input":{"status":"valid","value":{"city":"Tokyo"}},"attempt":1,"deadline":"2026-01-02T03:09:05.000Z"}`,
			`{}`},
		{`{"type":"tool.finished","id":"call_1","ok":true,"name":"get_weather","result":"It's clear in Tokyo."}`,
			`{"actions":[{"type":"message.append","message":{"role":"tool","content":"It's clear in Tokyo.","toolUseId":"call_1","name":"get_weather"}},{"type":"model.prompt"}]}`},
		{`{"type":"model.finished","message":{"role":"assistant","content":"saw: It's clear in Tokyo."},"stopReason":"end_turn","usage":{"inputTokens":0,"outputTokens":0}}`,
			`{"actions":[{"type":"message.append","message":{"role":"assistant","content":"saw: It's clear in Tokyo."}}]}`},
	}
	w.mu.Lock()
	seen := append([]engine.DecideRequest(nil), w.seen...)
	w.mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("the worker saw %d triggers, want %d", len(seen), len(want))
	}
	for i, r := range seen {
		if got := mustJSON(t, r.Trigger); got != want[i].trigger {
			t.Errorf("trigger %d:\n got %s\nwant %s", i, got, want[i].trigger)
		}
		if got := mustJSON(t, r.Proposed); got != want[i].proposed {
			t.Errorf("proposed for %s:\n got %s\nwant %s", r.Trigger.TriggerType(), got, want[i].proposed)
		}
		if r.Session != "" && r.Session != h.s.ID() {
			t.Errorf("request %d names session %q, want %q", i, r.Session, h.s.ID())
		}
	}

	// The model was re-prompted with the outcome.
	last := h.model.last(t)
	tools := toolMessages(last.Messages)
	if len(tools) != 1 || tools[0].Content != "It's clear in Tokyo." || tools[0].ToolUseID != "call_1" || tools[0].IsError {
		t.Errorf("the model's last transcript has tool messages %+v", tools)
	}
	tr := h.transcript()
	if len(tr) != 4 {
		t.Errorf("transcript has %d messages, want 4: %+v", len(tr), tr)
	}
	// Every message joined the transcript with a message event.
	var events []model.Message
	for _, f := range h.seen {
		if f.Type == engine.EventMessage {
			events = append(events, f.msg(t))
		}
	}
	if got, want := mustJSON(t, events), mustJSON(t, tr); got != want {
		t.Errorf("message events\n %s\nwant the transcript\n %s", got, want)
	}
}

// TestModelSeesNameDescriptionInput: the model sees name, description and
// input; output, handler and retry are for the engine.
func TestModelSeesNameDescriptionInput(t *testing.T) {
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Text: "hi"}, nil
	}}
	w := &testWorker{agent: engine.AgentConfig{Model: "m", Stream: true, Tools: []engine.AgentTool{
		{Name: "get_weather", Description: "Get the weather for a city.", Input: engine.Schema(weatherInput),
			Output: engine.Schema(`{"type":"string"}`), Retry: &engine.RetryPolicy{Attempts: 2}},
		{Name: "get_location", Handler: engine.HandlerClient},
	}}}
	h := setup(t, w, m, engine.Options{})
	h.send("hi")
	h.waitIdle()
	req := h.model.last(t)
	got := mustJSON(t, req.Tools)
	want := `[{"name":"get_weather","description":"Get the weather for a city.","inputSchema":` + weatherInput + `},{"name":"get_location"}]`
	if got != want {
		t.Errorf("the model saw tools\n %s\nwant %s", got, want)
	}
	if req.Model != "m" || !req.Stream {
		t.Errorf("the model request has model %q, stream %v", req.Model, req.Stream)
	}
}

// TestOpenBadConfig: a config that cannot be used is a clear error from
// Engine.Open, at session.start, not at the first call.
func TestOpenBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		worker engine.WorkerFunc
		is     error
		want   string
	}{
		{"input schema that does not compile", agentWith(engine.AgentTool{Name: "get_weather", Input: json.RawMessage(`{"type":5}`)}),
			engine.ErrBadConfig, `tool "get_weather": input schema does not compile`},
		{"output schema that does not compile", agentWith(engine.AgentTool{Name: "get_weather", Output: json.RawMessage(`{"required":"city"}`)}),
			engine.ErrBadConfig, `tool "get_weather": output schema does not compile`},
		{"schema with an unknown type", agentWith(engine.AgentTool{Name: "t", Input: json.RawMessage(`{"type":"text"}`)}),
			engine.ErrBadConfig, `tool "t": input schema does not compile`},
		{"schema that is not JSON", agentWith(engine.AgentTool{Name: "t", Input: json.RawMessage(`{"type":`)}),
			engine.ErrBadConfig, `tool "t": input schema is not JSON`},
		{"schema that refers outside itself", agentWith(engine.AgentTool{Name: "t", Input: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}),
			engine.ErrBadConfig, `schemas must be self-contained`},
		{"input schema no object passes", agentWith(engine.AgentTool{Name: "t", Input: json.RawMessage(`{"type":"string"}`)}),
			engine.ErrBadConfig, `tool "t": input schema: its type is "string", where a model's arguments are an object`},
		{"input schema of types without object", agentWith(engine.AgentTool{Name: "t", Input: json.RawMessage(`{"type":["array","null"]}`)}),
			engine.ErrBadConfig, `tool "t": input schema: its type is ["array","null"]`},
		{"tool without a name", agentWith(engine.AgentTool{Description: "x"}), engine.ErrBadConfig, `tools[0] has no name`},
		{"tool declared twice", agentWith(engine.AgentTool{Name: "t"}, engine.AgentTool{Name: "t"}), engine.ErrBadConfig, `tool "t" is declared twice`},
		{"tool name with a space", agentWith(engine.AgentTool{Name: "my tool"}), engine.ErrBadConfig, `tool name "my tool": a model's providers take 1 to 64 letters, digits, _ and -`},
		{"tool name past 64", agentWith(engine.AgentTool{Name: strings.Repeat("t", 65)}), engine.ErrBadConfig, `a model's providers take 1 to 64`},
		{"unknown handler", agentWith(engine.AgentTool{Name: "t", Handler: "server"}), engine.ErrBadConfig, `handler "server" is neither`},
		{"bad default retry", agentWith(engine.AgentTool{Name: "t", Retry: &engine.RetryPolicy{Timeout: "soon"}}), engine.ErrBadRetry, `timeout "soon" is not a Go duration`},
		{"no model", func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			return engine.Decision{Agent: &engine.AgentConfig{}}, nil
		}, engine.ErrBadConfig, "no model"},
		{"unknown model", func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "gpt-0"}}, nil
		}, model.ErrUnknownModel, `model "gpt-0"`},
		{"no agent", func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			return engine.Decision{}, nil
		}, engine.ErrBadConfig, "without an agent"},
		{"worker error", func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			return engine.Decision{}, errors.New("config store is down")
		}, engine.ErrWorker, "config store is down"},
		{"worker panic", func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			panic("nil map")
		}, engine.ErrWorker, "it panicked on session.start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ended atomic.Int32
			worker := engine.WorkerFunc(func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				if _, ok := req.Trigger.(engine.SessionEnd); ok {
					ended.Add(1)
					return engine.Decision{}, nil
				}
				return tt.worker(ctx, req)
			})
			e, err := engine.New(engine.Options{Worker: worker, Logger: quiet(), Models: model.ResolverFunc(func(id string) (model.Model, error) {
				if id != "fake-model" {
					return nil, fmt.Errorf("%w: %s", model.ErrUnknownModel, id)
				}
				return callsThenSummary(), nil
			})})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(context.Background())
			s, err := e.Open(context.Background(), engine.OpenOptions{})
			if err == nil {
				t.Fatalf("Open gave session %s, want an error", s.ID())
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("Open: %v; want errors.Is %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "failed to open session: ") {
				t.Errorf("Open: %q; want it to say %q", err, tt.want)
			}
			if n := e.Loaded(); n != 0 {
				t.Errorf("%d sessions open after a failed Open", n)
			}
			if ended.Load() != 1 {
				t.Errorf("the worker got session.end %d times, want 1", ended.Load())
			}
		})
	}
}

// agentWith answers session.start with an agent declaring tools.
func agentWith(tools ...engine.AgentTool) engine.WorkerFunc {
	return func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model", Tools: tools}}, nil
	}
}

func TestNewRequiresWorkerAndModels(t *testing.T) {
	if _, err := engine.New(engine.Options{Models: model.ResolverFunc(nil)}); err == nil || !strings.Contains(err.Error(), "Worker") {
		t.Errorf("New without a worker: %v", err)
	}
	if _, err := engine.New(engine.Options{Worker: &testWorker{}}); err == nil || !strings.Contains(err.Error(), "Models") {
		t.Errorf("New without models: %v", err)
	}
}

// TestWorkerFailureIsASessionError: a worker that returns an error or
// panics gives a clear error event; the session stays up and consistent.
func TestWorkerFailureIsASessionError(t *testing.T) {
	tests := []struct {
		name string
		on   string // the trigger type that fails
		fail func() (engine.Decision, error)
		want string
		// hidden: a panic's value, which stays in the log (it may hold a
		// query, a credential), never in what the page and model read.
		hidden string
	}{
		{"error on message", engine.TypeMessage, func() (engine.Decision, error) { return engine.Decision{}, errors.New("db down") }, "worker failed on message: db down", ""},
		{"panic on message", engine.TypeMessage, func() (engine.Decision, error) { panic("boom") }, "worker failed: it panicked on message (the gateway's log has why)", "boom"},
		{"error on model.finished", engine.TypeModelFinished, func() (engine.Decision, error) { return engine.Decision{}, errors.New("db down") }, "worker failed on model.finished: db down", ""},
		{"panic on tool.finished", engine.TypeToolFinished, func() (engine.Decision, error) { panic(errors.New("bad state")) }, "worker failed: it panicked on tool.finished", "bad state"},
		{"error on tool.execute", engine.TypeToolExecute, func() (engine.Decision, error) { return engine.Decision{}, errors.New("db down") }, "worker failed on tool.execute: db down", ""},
		{"panic on tool.execute", engine.TypeToolExecute, func() (engine.Decision, error) { panic("index out of range") }, "worker failed: it panicked on tool.execute", "index out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failed atomic.Bool
			once := func(typ string) bool { return typ == tt.on && failed.CompareAndSwap(false, true) }
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_weather", Input: engine.Schema(weatherInput)}}}}
			w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				if req.Trigger.TriggerType() == engine.TypeSessionStart {
					agent := w.agent
					return engine.Decision{Agent: &agent}, nil
				}
				if once(req.Trigger.TriggerType()) {
					return tt.fail()
				}
				return req.Proposed, nil
			}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				if once(engine.TypeToolExecute) {
					return tt.fail()
				}
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"sunny"`)}}}, nil
			}
			m := callsThenSummary(use("call_1", "get_weather", `{"city":"Tokyo"}`))
			h := setup(t, w, m, engine.Options{})
			h.send("weather?")
			ev := h.waitType(engine.EventError)
			if ev.Code != "worker_failed" || !strings.Contains(ev.errorText(), tt.want) {
				t.Errorf("error event %s; want code worker_failed and %q", ev.Raw, tt.want)
			}
			if tt.hidden != "" && strings.Contains(string(ev.Raw), tt.hidden) {
				t.Errorf("error event %s tells the page the panic's value %q", ev.Raw, tt.hidden)
			}
			h.waitIdle()
			if tt.on == engine.TypeToolExecute {
				// The failure settles the call as a tool error the model reads.
				fin := h.seen[slices.IndexFunc(h.seen, func(f frame) bool { return f.Type == engine.EventToolFinished })]
				if fin.OK || !strings.Contains(fin.Error, "get_weather failed in the worker") || fin.Code != string(engine.CodeToolFailed) ||
					(tt.hidden != "" && strings.Contains(string(fin.Raw), tt.hidden)) {
					t.Errorf("tool.finished %s", fin.Raw)
				}
				if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || !tm[0].IsError {
					t.Errorf("the model saw tool messages %+v", tm)
				}
			}
			// What happened is recorded and the transcript stays whole: every
			// tool use is answered, so the next prompt is one a provider takes.
			tr := h.transcript()
			if len(tr) == 0 || tr[0].Role != model.RoleUser || tr[0].Content != "weather?" {
				t.Fatalf("the user's message is not in the transcript: %+v", tr)
			}
			checkWhole(t, tr)
			if tt.on == engine.TypeToolFinished && len(toolMessages(tr)) != 1 {
				t.Errorf("the settled call's outcome is not in the transcript: %+v", tr)
			}
			// The session is still up: the next message runs the loop.
			h.send("again?")
			h.waitIdle()
			if n := h.count(engine.EventError, ""); n != 1 {
				t.Errorf("%d error events, want 1: %s", n, h.types())
			}
			if tr := h.transcript(); tr[len(tr)-1].Role != model.RoleAssistant || !strings.HasPrefix(tr[len(tr)-1].Content, "saw: ") {
				t.Errorf("after recovery the transcript ends with %+v", tr[len(tr)-1])
			}
		})
	}
}

// TestTriggersInOrder: one goroutine per session decides every trigger but
// tool.execute, one at a time, in the order they happened.
func TestTriggersInOrder(t *testing.T) {
	var inside atomic.Int32
	var overlap atomic.Bool
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if inside.Add(1) > 1 {
			overlap.Store(true)
		}
		defer inside.Add(-1)
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
		}
		return req.Proposed, nil
	}
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Text: "ok"}, nil
	}}
	h := setup(t, w, m, engine.Options{})
	const n = 20
	for i := range n {
		// Sent one after another, so the order is known; the session takes
		// them while model turns run.
		h.send(fmt.Sprintf("msg %02d", i))
	}
	// Wait until the model has answered a transcript holding all of them.
	for {
		h.waitIdle()
		if users := 0; len(w.requests(engine.TypeMessage)) == n {
			for _, msg := range h.model.last(t).Messages {
				if msg.Role == model.RoleUser {
					users++
				}
			}
			if users == n {
				break
			}
		}
	}
	if overlap.Load() {
		t.Error("two triggers were decided at once")
	}
	var got []string
	for _, r := range w.requests(engine.TypeMessage) {
		got = append(got, r.Trigger.(engine.UserMessage).Message.Content)
	}
	if !slices.IsSorted(got) || len(got) != n {
		t.Errorf("message triggers out of order or missing: %v", got)
	}
	var users []string
	for _, msg := range h.transcript() {
		if msg.Role == model.RoleUser {
			users = append(users, msg.Content)
		}
	}
	if !slices.Equal(users, got) {
		t.Errorf("transcript users %v, want %v", users, got)
	}
}

// TestParallelCalls: the calls of one model turn are dispatched at once;
// tool.finished proposes hold until the last sibling settles, then the
// outcomes in call order and model.prompt.
func TestParallelCalls(t *testing.T) {
	answers := map[string]chan engine.Decision{"a": make(chan engine.Decision), "b": make(chan engine.Decision), "c": make(chan engine.Decision)}
	started := make(chan string, 3)
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "slow"}}}}
	w.execute = func(ctx context.Context, t engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		started <- t.ID
		select {
		case d := <-answers[t.ID]:
			return d, nil
		case <-ctx.Done():
			return engine.Decision{}, ctx.Err()
		}
	}
	m := callsThenSummary(use("a", "slow", `{"n":1}`), use("b", "slow", `{"n":2}`), use("c", "slow", `{"n":3}`))
	h := setup(t, w, m, engine.Options{})
	h.send("go")
	// All three run before any answers: they were dispatched at once.
	got := map[string]bool{}
	for range 3 {
		got[recv(t, started, "tool.execute")] = true
	}
	if len(got) != 3 {
		t.Fatalf("started %v", got)
	}
	// Settle them in reverse order.
	for _, id := range []string{"c", "b", "a"} {
		answers[id] <- engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"result ` + id + `"`)}}}
		h.waitFinished(id)
	}
	h.waitIdle()

	finished := w.requests(engine.TypeToolFinished)
	if len(finished) != 3 {
		t.Fatalf("%d tool.finished triggers, want 3", len(finished))
	}
	hold := `{"actions":[{"type":"hold"}]}`
	for i, id := range []string{"c", "b"} {
		if tr := finished[i].Trigger.(engine.ToolFinished); tr.ID != id {
			t.Errorf("tool.finished %d is for %s, want %s", i, tr.ID, id)
		}
		if p := mustJSON(t, finished[i].Proposed); p != hold {
			t.Errorf("tool.finished %s proposed %s, want %s", id, p, hold)
		}
	}
	wantLast := `{"actions":[` +
		`{"type":"message.append","message":{"role":"tool","content":"result a","toolUseId":"a","name":"slow"}},` +
		`{"type":"message.append","message":{"role":"tool","content":"result b","toolUseId":"b","name":"slow"}},` +
		`{"type":"message.append","message":{"role":"tool","content":"result c","toolUseId":"c","name":"slow"}},` +
		`{"type":"model.prompt"}]}`
	if p := mustJSON(t, finished[2].Proposed); p != wantLast {
		t.Errorf("the last tool.finished proposed\n %s\nwant %s", p, wantLast)
	}
	if reqs := h.model.requests(); len(reqs) != 2 {
		t.Errorf("the model was prompted %d times, want 2 (no prompt before the last sibling)", len(reqs))
	}
	var ids []string
	for _, msg := range toolMessages(h.model.last(t).Messages) {
		ids = append(ids, msg.ToolUseID+"="+msg.Content)
	}
	if want := []string{"a=result a", "b=result b", "c=result c"}; !slices.Equal(ids, want) {
		t.Errorf("the model saw %v, want %v", ids, want)
	}
}

// TestWorkerIssuesToolCalls: a worker's own tool.call is routed by its
// handler; an omitted id is minted by the engine.
func TestWorkerIssuesToolCalls(t *testing.T) {
	b := newBrowser()
	executed := make(chan engine.ToolExecute, 1)
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{
		{Name: "lookup"}, {Name: "get_location", Handler: engine.HandlerClient},
	}}}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		case engine.UserMessage:
			return engine.Decision{Actions: []engine.Action{
				engine.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)},
				engine.ToolCall{ID: "loc", Name: "get_location", Arguments: json.RawMessage(`{}`), Handler: engine.HandlerClient},
			}}, nil
		}
		return req.Proposed, nil
	}
	w.execute = func(ctx context.Context, t engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		executed <- t
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{}, b)
	h.send("hi")
	ex := recv(t, executed, "tool.execute")
	if !strings.HasPrefix(ex.ID, "call_") || len(ex.ID) <= len("call_") || ex.Name != "lookup" || ex.Arguments != `{"q":"x"}` {
		t.Errorf("tool.execute %+v; want a minted call_ id and the raw arguments", ex)
	}
	cc := recv(t, b.calls, "client dispatch")
	if cc.ID != "loc" || cc.Name != "get_location" {
		t.Errorf("client call %+v", cc)
	}
	h.answer(engine.ToolResult{ID: "loc", Attempt: 1, Result: json.RawMessage(`{"lat":1,"lon":2}`)})
	h.waitIdle()
	var got []string
	for _, msg := range toolMessages(h.model.last(t).Messages) {
		got = append(got, msg.Name+"="+msg.Content)
	}
	if want := []string{"lookup=found", `get_location={"lat":1,"lon":2}`}; !slices.Equal(got, want) {
		t.Errorf("the model saw %v, want %v", got, want)
	}
}

// TestClientCalls: client-handled calls go through the ClientRouter with
// attempt and an RFC 3339 deadline; the browser's answer settles them.
func TestClientCalls(t *testing.T) {
	t.Run("result", func(t *testing.T) {
		b := newBrowser()
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}}
		h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{}, b)
		h.send("where am I?")
		cc := recv(t, b.calls, "client dispatch")
		want := engine.ClientCall{ID: "call_1", Name: "get_location", Arguments: `{}`,
			Input: engine.ToolInput{Status: "valid", Value: json.RawMessage(`{}`)}, Attempt: 1, Attempts: 1,
			Deadline: "2026-01-02T03:04:35.000Z"}
		if mustJSON(t, cc) != mustJSON(t, want) {
			t.Errorf("dispatched %+v\nwant %+v", cc, want)
		}
		if len(w.requests(engine.TypeToolExecute)) != 0 {
			t.Error("a client call reached the worker as tool.execute")
		}
		h.answer(engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"Tokyo"`)})
		fin := h.waitFinished("call_1")
		if len(b.releases) != 0 {
			t.Errorf("the answered attempt was cancelled: %+v", <-b.releases)
		}
		if !fin.OK || fin.Result != "Tokyo" {
			t.Errorf("tool.finished %s", fin.Raw)
		}
		h.waitIdle()
		if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || tm[0].Content != "Tokyo" {
			t.Errorf("the model saw %+v", tm)
		}
	})
	t.Run("bad input carries the proposed error", func(t *testing.T) {
		b := newBrowser()
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "set_theme", Handler: engine.HandlerClient,
			Input: engine.Schema(`{"type":"object","properties":{"theme":{"enum":["dark","light"]}},"required":["theme"]}`)}}}}
		h := setup(t, w, callsThenSummary(use("call_1", "set_theme", `{"theme":"blue"}`)), engine.Options{}, b)
		h.send("blue theme")
		cc := recv(t, b.calls, "client dispatch")
		if cc.Input.Status != engine.InputInvalid || cc.Proposed == nil || cc.Proposed.Code != engine.CodeInvalidInput || cc.Proposed.ID != "call_1" || cc.Proposed.Attempt != 1 {
			t.Fatalf("dispatched %+v (proposed %+v)", cc, cc.Proposed)
		}
		// The browser answers with the proposal as-is.
		h.answer(*cc.Proposed)
		fin := h.waitFinished("call_1")
		if fin.OK || fin.Error != cc.Proposed.Error || fin.Code != string(engine.CodeInvalidInput) {
			t.Errorf("tool.finished %s", fin.Raw)
		}
	})
	for _, tt := range []struct {
		name  string
		pages []*browser
	}{
		{"no page", nil},
		{"no page declared the tool", []*browser{{tools: []string{"set_theme"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}}
			h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{}, tt.pages...)
			h.send("where am I?")
			fin := h.waitFinished("call_1")
			if want := "no open page of this chat provides it"; fin.OK || fin.Code != string(engine.CodeClientUnavailable) || !strings.Contains(fin.Error, want) {
				t.Errorf("tool.finished %s; want code client_unavailable and %q", fin.Raw, want)
			}
			h.waitIdle()
			if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || !tm[0].IsError {
				t.Errorf("the model saw %+v", tm)
			}
		})
	}
}

// TestModelFailure: a failed model turn keeps its text, never runs its tool
// uses, and is reported.
func TestModelFailure(t *testing.T) {
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Text: "I will call", ToolUses: []model.ToolUse{use("call_1", "lookup", `{}`)}},
			&model.Error{Provider: "fake", Truncated: true, Message: "eof"}
	}}
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	h := setup(t, w, m, engine.Options{})
	h.send("go")
	fin := h.waitType(engine.EventModelFinished)
	if fin.StopReason != model.StopError || !strings.Contains(fin.Error, "stream cut off") {
		t.Errorf("model.finished %s", fin.Raw)
	}
	if ev := h.waitType(engine.EventError); ev.Code != "model_failed" {
		t.Errorf("error %s", ev.Raw)
	}
	h.waitIdle()
	if n := len(w.requests(engine.TypeToolExecute)); n != 0 || h.count(engine.EventToolStarted, "") != 0 {
		t.Errorf("a half-streamed tool use ran")
	}
	if tr := h.transcript(); len(tr) != 2 || tr[1].Content != "I will call" || len(tr[1].ToolUses) != 0 {
		t.Errorf("transcript %+v", tr)
	}
}

// TestDecideTimeout: a worker that does not answer a trigger within
// DecideTimeout is a worker failure; the session goes on.
func TestDecideTimeout(t *testing.T) {
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch t := req.Trigger.(type) {
		case engine.SessionStart:
			return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
		case engine.UserMessage:
			if t.Message.Content == "stall" {
				<-ctx.Done()
				return engine.Decision{}, ctx.Err()
			}
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{DecideTimeout: time.Millisecond})
	h.send("stall")
	ev := h.waitType(engine.EventError)
	if ev.Code != "worker_failed" || !strings.Contains(ev.errorText(), "worker failed on message: context deadline exceeded") {
		t.Errorf("error %s", ev.Raw)
	}
	h.send("hello")
	h.waitFor("the answer", func(f frame) bool { return f.Type == engine.EventModelFinished })
	h.waitIdle()
}

// TestWorkerCallHasNoDefaultRetry: a worker's own tool.call without retry
// has one attempt, whatever the tool declares; only the proposed call
// copies the declared policy.
func TestWorkerCallHasNoDefaultRetry(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: &engine.RetryPolicy{Attempts: 3}}}}}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		case engine.UserMessage:
			return engine.Decision{Actions: []engine.Action{engine.ToolCall{ID: "mine", Name: "get_location", Handler: engine.HandlerClient}}}, nil
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{}, b)
	h.send("go")
	if c := recv(t, b.calls, "dispatch"); c.Attempts != 1 || c.Arguments != "{}" {
		t.Errorf("dispatch %+v; want 1 attempt and {} arguments", c)
	}
	h.clock.Advance(30 * time.Second)
	if fin := h.waitFinished("mine"); fin.Error != "get_location timed out: 1 attempt of 30s, no answer from the browser." {
		t.Errorf("tool.finished %s", fin.Raw)
	}
}

// TestToolUseWithoutID: a tool use the model gave no id gets one, and its
// tool message names the same id.
func TestToolUseWithoutID(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("", "lookup", `{}`)), engine.Options{})
	h.send("go")
	h.waitIdle()
	tr := h.transcript()
	if len(tr) != 4 || len(tr[1].ToolUses) != 1 {
		t.Fatalf("transcript %+v", tr)
	}
	id := tr[1].ToolUses[0].ID
	if !strings.HasPrefix(id, "call_") || tr[2].ToolUseID != id {
		t.Errorf("tool use id %q, tool message for %q", id, tr[2].ToolUseID)
	}
	if ex := w.requests(engine.TypeToolExecute)[0].Trigger.(engine.ToolExecute); ex.ID != id {
		t.Errorf("tool.execute for %q, want %q", ex.ID, id)
	}
}

// checkWhole fails unless each assistant tool use is answered by the tool
// messages right after it, in order.
func checkWhole(t *testing.T, tr []engine.Message) {
	t.Helper()
	for i, m := range tr {
		for j, u := range m.ToolUses {
			k := i + 1 + j
			if k >= len(tr) || tr[k].Role != model.RoleTool || tr[k].ToolUseID != u.ID {
				t.Errorf("tool use %s (message %d) is not answered in place: %+v", u.ID, i, tr)
				return
			}
		}
	}
}

// TestMessageMidTurnWaits: a user message that arrives while a call is open
// waits for the turn to end, so it never splits a tool use from its result,
// and is answered after it.
func TestMessageMidTurnWaits(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{}, b)
	h.send("where am I?")
	recv(t, b.calls, "first dispatch")
	h.send("and the time?")
	h.answer(engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"Tokyo"`)})
	recv(t, b.calls, "second dispatch")
	h.answer(engine.ToolResult{ID: "call_1-2", Attempt: 1, Result: json.RawMessage(`"Osaka"`)})
	h.waitIdle()
	var got []string
	for _, m := range h.transcript() {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:where am I?", "assistant:", "tool:Tokyo", "assistant:saw: Tokyo",
		"user:and the time?", "assistant:", "tool:Osaka", "assistant:saw: Osaka"}
	if !slices.Equal(got, want) {
		t.Errorf("transcript\n%q\nwant\n%q", got, want)
	}
	checkWhole(t, h.transcript())
	if n := h.count(engine.EventSessionIdle, ""); n != 2 {
		t.Errorf("%d session.idle events, want 2 (after the start, after both messages): %s", n, h.types())
	}
}

// TestDecideContextEndsWithDecide: the context a worker's Decide gets is
// cancelled once Decide has returned, even when Decide never looked at it.
func TestDecideContextEndsWithDecide(t *testing.T) {
	w := &testWorker{}
	kept := make(chan context.Context, 16)
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
		}
		kept <- ctx // not looked at: Decide answers at once
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{})
	h.send("hello")
	h.waitIdle()
	ctx := <-kept
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("the context of a returned Decide: %v, want context.Canceled", ctx.Err())
	}
}

// TestIdleSessionHoldsNoGoroutine: a session's goroutine runs only while it
// has messages, so a session open and idle (a chat nobody types in) costs
// no goroutine; the next message starts one again.
func TestIdleSessionHoldsNoGoroutine(t *testing.T) {
	m := callsThenSummary(use("call_1", "get_weather", `{"city":"Tokyo"}`))
	w := recordingToolWorker(&engine.ToolWorker{Agent: engine.AgentConfig{Model: "fake-model"}, Tools: []engine.Tool{weatherTool()}})
	h := setup(t, w, m, engine.Options{})
	for turn := range 2 {
		h.send("What's the weather in Tokyo?")
		h.waitIdle()
		waitNoSessionGoroutine(t, turn)
	}
}

// waitNoSessionGoroutine waits until no goroutine empties a session's
// inbox (mailbox.run).
func waitNoSessionGoroutine(t *testing.T, turn int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("engine.(*mailbox).run(")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after turn %d the idle session still holds its goroutine:\n%s", turn+1, buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}
