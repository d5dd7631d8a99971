package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/testlog"
)

// TestToolReadsWhoItRunsFor: a Go tool learns whose session it runs in
// (the owner: the browser, or the person the gateway's Identify named)
// and which call it answers, so that it may refuse someone else's data.
func TestToolReadsWhoItRunsFor(t *testing.T) {
	ctx := context.Background()
	got := make(chan engine.DecideRequest, 1)
	whoami := engine.Tool{Name: "whoami", Exec: func(ctx context.Context, _ json.RawMessage) (any, error) {
		req, ok := engine.RequestFromContext(ctx)
		if !ok {
			return nil, errors.New("no request in the tool's context")
		}
		got <- req
		return req.Owner, nil
	}}
	calls := model.Func(func(_ context.Context, req model.Request, _ func(string)) (model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
			return model.Response{Text: "you are " + last.Content, StopReason: model.StopEndTurn}, nil
		}
		return model.Response{ToolUses: []model.ToolUse{{ID: "call_1", Name: "whoami", Arguments: "{}"}}, StopReason: model.StopToolUse}, nil
	})
	e, err := engine.New(engine.Options{
		Worker: &engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"}, Tools: []engine.Tool{whoami}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return calls, nil }),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "who am I?"); err != nil {
		t.Fatal(err)
	}
	req := <-got
	exec, _ := req.Trigger.(engine.ToolExecute)
	if req.Owner != "alice" || req.Session != s.ID() || exec.ID != "call_1" || exec.Attempt != 1 {
		t.Errorf("the tool ran for %+v, want alice's session %s, call_1 attempt 1", req, s.ID())
	}
}

// TestToolWorkerCheckedAtNew: a ToolWorker's agent is known when the engine
// is made, so a mistake in it stops engine.New with what was wrong, where
// it was found only when each user opened a chat (bad_config), and a tool
// with nothing to run failed its first call with a nil pointer.
func TestToolWorkerCheckedAtNew(t *testing.T) {
	run := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	tests := []struct {
		name   string
		worker engine.ToolWorker
		want   string
	}{
		{"a schema that does not compile", engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"},
			Tools: []engine.Tool{{Name: "lookup", Input: json.RawMessage(`{"type":"object","required":"id"}`), Exec: run}}}, `"lookup": input schema does not compile`},
		{"a tool with nothing to run", engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"},
			Tools: []engine.Tool{{Name: "lookup"}}}, `Tools[0] "lookup" has neither Exec nor Agent`},
		{"a name providers refuse", engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"},
			Tools: []engine.Tool{{Name: "look up", Exec: run}}}, `tool name "look up"`},
		{"a tool declared twice", engine.ToolWorker{Agent: engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "lookup", Handler: engine.HandlerClient}}},
			Tools: []engine.Tool{{Name: "lookup", Exec: run}}}, `tool "lookup" is declared twice`},
		{"no model", engine.ToolWorker{Tools: []engine.Tool{{Name: "lookup", Exec: run}}}, "no model"},
		{"a sub-agent's bad approval", engine.ToolWorker{Agent: engine.AgentConfig{Model: "m"},
			Tools: []engine.Tool{{Name: "research", Agent: &engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "pay", Approval: "sometimes"}}}}}}, `approval "sometimes"`},
	}
	models := model.ResolverFunc(func(string) (model.Model, error) { return nil, errors.New("not asked") })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.New(engine.Options{Worker: &tt.worker, Models: models, Logger: slog.New(slog.DiscardHandler)})
			if !errors.Is(err, engine.ErrBadConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("engine.New = %v, want a bad config naming %s", err, tt.want)
			}
		})
	}
}

// TestModelPanicStaysInTheLog: a model that panics ends its turn with an
// error the page and the next prompt read, which does not carry the
// panic's value (a request, a key); the log has it, with its stack.
func TestModelPanicStaysInTheLog(t *testing.T) {
	logs := &testlog.Buffer{}
	panics := model.Func(func(context.Context, model.Request, func(string)) (model.Response, error) {
		panic("request to https://api.example/v1?key=sk-secret failed")
	})
	w := &testWorker{agent: engine.AgentConfig{}}
	h := setup(t, w, nil, engine.Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Models: model.ResolverFunc(func(string) (model.Model, error) { return panics, nil }),
	})
	h.send("hello")
	fin := h.waitType(engine.EventModelFinished)
	if !strings.Contains(string(fin.Raw), "the model panicked") || strings.Contains(string(fin.Raw), "sk-secret") {
		t.Errorf("model.finished %s, want the panic said without its value", fin.Raw)
	}
	if !strings.Contains(logs.String(), "sk-secret") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the log lacks the panic's value or its stack:\n%s", logs.String())
	}
}
