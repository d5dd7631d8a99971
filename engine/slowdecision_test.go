package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// slowWorker holds its decisions of one trigger type until released, as a
// worker that checks something slow does; every other trigger it answers
// with the proposal at once.
type slowWorker struct {
	testWorker
	holds   string
	arrived chan struct{}
	release chan struct{}
}

func newSlowWorker(holds string, tools ...engine.AgentTool) *slowWorker {
	w := &slowWorker{holds: holds, arrived: make(chan struct{}, 10), release: make(chan struct{})}
	w.agent = engine.AgentConfig{Tools: tools}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		}
		if req.Trigger.TriggerType() != w.holds {
			return req.Proposed, nil
		}
		done := ctx.Done() // a worker that waits watches its context
		w.arrived <- struct{}{}
		select {
		case <-w.release:
			return req.Proposed, nil
		case <-done:
			return engine.Decision{}, ctx.Err()
		}
	}
	return w
}

// TestASlowDecisionAnswersThePageFirst: a page's frame whose step asks the
// worker to decide (a message, a tool's answer) is answered (message.taken,
// tool.finished) once the step so far is stored, when the decision takes
// slowDecision (250 ms), not once the worker answers: a decision slower
// than the SDK's answerTimeout no longer makes the page take its socket
// for dead. The step's work goes on with the decision.
func TestASlowDecisionAnswersThePageFirst(t *testing.T) {
	const slow = 250 * time.Millisecond
	t.Run("message", func(t *testing.T) {
		w := newSlowWorker(engine.TypeMessage)
		h := setup(t, &w.testWorker, callsThenSummary(), engine.Options{})
		sent := make(chan error, 1)
		go func() { sent <- h.page.SendOnce(context.Background(), "m1", "hello") }()
		recv(t, w.arrived, "the message's decision")
		select {
		case err := <-sent:
			t.Fatalf("SendOnce returned (%v) before the decision took its time", err)
		default:
		}
		h.clock.Advance(slow)
		// SendOnce itself may be running the step (the session was idle),
		// so it returns with it; the page hears first.
		if f := h.waitType(engine.FrameMessageTaken); f.ID != "m1" {
			t.Errorf("message.taken %s, want m1's", f.Raw)
		}
		for _, f := range h.seen {
			if f.Type == engine.EventMessage {
				t.Errorf("a message event before the worker decided: %s", f.Raw)
			}
		}
		close(w.release)
		if err := recv(t, sent, "SendOnce's return"); err != nil {
			t.Fatalf("SendOnce: %v", err)
		}
		if m := h.waitType(engine.EventMessage).msg(t); m.Role != model.RoleUser || m.Content != "hello" {
			t.Errorf("first message event %+v, want the user's", m)
		}
		h.waitIdle()
		var users, replies int
		for _, m := range h.transcript() {
			switch {
			case m.Role == model.RoleUser && m.Content == "hello":
				users++
			case m.Role == model.RoleAssistant && m.Content == "ok":
				replies++
			}
		}
		if users != 1 || replies != 1 {
			t.Errorf("transcript has the message %d times and the reply %d times, want each once", users, replies)
		}
		if n := h.count(engine.FrameMessageTaken, "m1"); n != 1 {
			t.Errorf("%d message.taken for m1, want 1", n)
		}
	})
	t.Run("tool answer", func(t *testing.T) {
		b := newBrowser()
		w := newSlowWorker(engine.TypeToolFinished, engine.AgentTool{Name: "get_location", Handler: engine.HandlerClient})
		h := setup(t, &w.testWorker, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{}, b)
		h.send("where am I?")
		recv(t, b.calls, "the client call")
		answered := make(chan error, 1)
		go func() {
			answered <- h.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"Tokyo"`)})
		}()
		recv(t, w.arrived, "the tool.finished decision")
		h.clock.Advance(slow)
		if fin := h.waitFinished("call_1"); !fin.OK || fin.Result != "Tokyo" {
			t.Errorf("tool.finished %s", fin.Raw)
		}
		close(w.release)
		if err := recv(t, answered, "Answer's return"); err != nil {
			t.Fatalf("Answer: %v", err)
		}
		if f := h.waitFor("the reply", func(f frame) bool { return f.Type == engine.EventMessage && f.msg(t).Role == model.RoleAssistant }); f.msg(t).Content != "saw: Tokyo" {
			t.Errorf("reply %s, want the model to have seen the result", f.Raw)
		}
		h.waitIdle()
		if n := h.count(engine.EventToolFinished, "call_1"); n != 1 {
			t.Errorf("%d tool.finished for call_1, want 1", n)
		}
	})
	t.Run("a quick decision", func(t *testing.T) {
		// The worker answers before slowDecision: the step is stored once,
		// message.taken just before its message event.
		w := newSlowWorker(engine.TypeMessage)
		close(w.release)
		h := setup(t, &w.testWorker, callsThenSummary(), engine.Options{})
		if err := h.page.SendOnce(context.Background(), "m1", "hello"); err != nil {
			t.Fatal(err)
		}
		h.waitIdle()
		var types []string
		for _, f := range h.seen {
			types = append(types, f.Type)
		}
		for i, typ := range types {
			if typ == engine.FrameMessageTaken && (i+1 == len(types) || types[i+1] != engine.EventMessage) {
				t.Errorf("message.taken not just before the message event: %v", types)
			}
		}
	})
}
