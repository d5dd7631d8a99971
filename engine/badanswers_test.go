package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// TestBadAnswers: an answer the session cannot take is a clear error and
// changes nothing; the call still settles once, normally.
func TestBadAnswers(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}, {Name: "lookup"}}}}
	lookup := make(chan struct{})
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		<-lookup
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("loc", "get_location", `{}`), use("look", "lookup", `{}`)), engine.Options{}, b)
	h.send("go")
	recv(t, b.calls, "client dispatch")
	ctx := context.Background()

	bad := []struct {
		name   string
		answer engine.Action
		is     error
		want   string
	}{
		{"unknown call id", engine.ToolResult{ID: "nope", Attempt: 1, Result: json.RawMessage(`1`)}, engine.ErrUnknownCall, `"nope"`},
		{"no call id", engine.ToolResult{Attempt: 1, Result: json.RawMessage(`1`)}, engine.ErrUnknownCall, "names no call id"},
		{"a worker call answered by the browser", engine.ToolResult{ID: "look", Attempt: 1, Result: json.RawMessage(`1`)}, engine.ErrUnknownCall, "runs on the worker"},
		{"a future attempt", engine.ToolError{ID: "loc", Attempt: 2, Error: "x"}, engine.ErrStaleAttempt, "attempt 2 (current: 1)"},
		{"a code that is not a tool error code", engine.ToolError{ID: "loc", Attempt: 1, Error: "x", Code: "busy"}, engine.ErrBadRequest, `code "busy"`},
	}
	for _, tt := range bad {
		err := h.s.Answer(ctx, tt.answer)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Answer gave %v; want %v saying %q", tt.name, err, tt.is, tt.want)
		}
	}
	if err := h.s.Answer(ctx, engine.ModelPrompt{}); err == nil || !strings.Contains(err.Error(), "not a tool answer") {
		t.Errorf("Answer(model.prompt): %v", err)
	}
	if n := h.count(engine.EventToolFinished, ""); n != 0 {
		t.Fatalf("bad answers settled %d calls", n)
	}

	h.answer(engine.ToolResult{ID: "loc", Attempt: 1, Result: json.RawMessage(`"Tokyo"`)})
	h.waitFinished("loc")
	err := h.s.Answer(ctx, engine.ToolResult{ID: "loc", Attempt: 1, Result: json.RawMessage(`"Osaka"`)})
	if !errors.Is(err, engine.ErrSettled) {
		t.Errorf("second result: %v, want ErrSettled", err)
	}
	err = h.s.Answer(ctx, engine.ToolError{ID: "loc", Attempt: 1, Error: "late"})
	if !errors.Is(err, engine.ErrSettled) {
		t.Errorf("error after the result: %v, want ErrSettled", err)
	}
	close(lookup)
	h.waitIdle()
	if n := h.count(engine.EventToolFinished, "loc"); n != 1 {
		t.Errorf("loc settled %d times", n)
	}
	var got []string
	for _, msg := range toolMessages(h.model.last(t).Messages) {
		got = append(got, msg.Content)
	}
	if want := []string{"Tokyo", "found"}; !slices.Equal(got, want) {
		t.Errorf("the model saw %v, want %v", got, want)
	}
}

// oddAction is an Action the engine does not know.
type oddAction struct{}

func (oddAction) ActionType() string { return "tool.explode" }

// TestBadDecisions: a decision's bad action is a clear error event; the
// rest of the decision still runs and the session stays consistent.
func TestBadDecisions(t *testing.T) {
	tests := []struct {
		name   string
		action engine.Action
		want   string
	}{
		{"answer for an unknown call", engine.ToolResult{ID: "nope", Result: json.RawMessage(`1`)}, `actions[0]: unknown tool call: "nope"`},
		{"action of unknown type", oddAction{}, `actions[0]: unknown action type "tool.explode"`},
		{"nil action", nil, "actions[0]: action is null"},
		{"tool.call without name", engine.ToolCall{}, "actions[0]: tool.call has no name"},
		{"tool.call with a bad handler", engine.ToolCall{Name: "x", Handler: "server"}, `handler "server" is neither`},
		{"message with a bad role", engine.MessageAppend{Message: model.Message{Role: "system", Content: "x"}}, `role "system"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &testWorker{}
			w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				switch req.Trigger.(type) {
				case engine.SessionStart:
					return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
				case engine.UserMessage:
					if req.Trigger.(engine.UserMessage).Message.Content == "bad" {
						return engine.Decision{Actions: append([]engine.Action{tt.action}, req.Proposed.Actions...)}, nil
					}
				}
				return req.Proposed, nil
			}
			h := setup(t, w, callsThenSummary(), engine.Options{})
			h.send("bad")
			ev := h.waitType(engine.EventError)
			if ev.Code != "bad_decision" || !strings.Contains(ev.errorText(), tt.want) {
				t.Errorf("error event %s; want bad_decision saying %q", ev.Raw, tt.want)
			}
			// The rest of the decision ran: the message was appended and the model prompted.
			h.waitIdle()
			if reqs := h.model.requests(); len(reqs) != 1 {
				t.Errorf("the model was prompted %d times, want 1", len(reqs))
			}
			h.send("good")
			h.waitIdle()
			if tr := h.transcript(); len(tr) != 4 {
				t.Errorf("transcript %+v", tr)
			}
		})
	}
}

// TestDuplicateCallID: a worker's tool.call whose id is taken is refused,
// and the first call is unaffected. (A model's duplicate gets an id of its
// own: TestToolUseIDsGivenTwice.)
func TestDuplicateCallID(t *testing.T) {
	b := newBrowser()
	agent := engine.AgentConfig{Model: "fake-model", Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}
	w := &testWorker{agent: agent}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			return engine.Decision{Agent: &agent}, nil
		case engine.ModelFinished:
			d := req.Proposed
			d.Actions = append(d.Actions, engine.ToolCall{ID: "same", Name: "get_location", Arguments: json.RawMessage(`"{}"`), Handler: engine.HandlerClient})
			return d, nil
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(use("same", "get_location", `{}`)), engine.Options{}, b)
	h.send("go")
	ev := h.waitType(engine.EventError)
	if ev.Code != "bad_decision" || !strings.Contains(ev.errorText(), `id "same" is already in use`) {
		t.Errorf("error event %s", ev.Raw)
	}
	recv(t, b.calls, "client dispatch")
	h.answer(engine.ToolResult{ID: "same", Attempt: 1, Result: json.RawMessage(`"x"`)})
	h.waitIdle()
	if n := h.count(engine.EventToolFinished, "same"); n != 1 {
		t.Errorf("%d tool.finished for the id", n)
	}
}
