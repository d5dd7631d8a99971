package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
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

// fenceable is a memory store whose appends can be refused as fenced, as a
// node's are once another node took its session over.
func fenceable() (*engine.MemoryStore, func(bool)) {
	store := engine.NewMemoryStore()
	var fenced atomic.Bool
	store.Fail = func(session string, _ engine.Batch) error {
		if fenced.Load() {
			return fmt.Errorf("%w: another node took session %s", engine.ErrFenced, session)
		}
		return nil
	}
	return store, fenced.Store
}

// takenOver waits for the fenced session to leave memory, lifts the
// fence, and loads the session as the node that took it over would.
func takenOver(t *testing.T, h *harness, fence func(bool)) *engine.Session {
	t.Helper()
	waitUntil(t, "the fenced session to leave memory", func() bool { _, in := h.e.Session(h.s.ID()); return !in })
	fence(false)
	s, err := h.e.Load(context.Background(), h.s.ID())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestASlowDecisionTakenOver: what a slow decision stored meanwhile, its
// trigger still queued, is decided by the node that takes the session
// over, once, and nothing is doubled (a review's cases).
func TestASlowDecisionTakenOver(t *testing.T) {
	const slow = 250 * time.Millisecond
	t.Run("model.finished with a tool use", func(t *testing.T) {
		store, fence := fenceable()
		w := newSlowWorker(engine.TypeModelFinished, engine.AgentTool{Name: "lookup"})
		var holding atomic.Bool
		holding.Store(true)
		held := w.decide
		w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			if _, start := req.Trigger.(engine.SessionStart); !holding.Load() && !start {
				return req.Proposed, nil
			}
			return held(ctx, req)
		}
		w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"r"`)}}}, nil
		}
		h := setup(t, &w.testWorker, callsThenSummary(use("call_1", "lookup", `{"q":1}`)), engine.Options{Store: store})
		h.send("go")
		recv(t, w.arrived, "the model.finished decision")
		h.clock.Advance(slow)
		fence(true)
		holding.Store(false)
		close(w.release)
		s := takenOver(t, h, fence)
		waitUntil(t, "the reply", func() bool {
			tr, _ := s.Transcript(context.Background())
			return len(tr) > 0 && tr[len(tr)-1].Content == "saw: r"
		})
		tr, _ := s.Transcript(context.Background())
		var roles []string
		for _, m := range tr {
			roles = append(roles, m.Role)
		}
		if fmt.Sprint(roles) != "[user assistant tool assistant]" {
			t.Errorf("transcript roles %v, want each message once", roles)
		}
	})
	t.Run("a message by its id", func(t *testing.T) {
		store, fence := fenceable()
		w := newSlowWorker(engine.TypeMessage)
		h := setup(t, &w.testWorker, callsThenSummary(), engine.Options{Store: store})
		go func() { _ = h.page.SendOnce(context.Background(), "m1", "hello") }()
		recv(t, w.arrived, "the message's decision")
		h.clock.Advance(slow)
		if f := h.waitType(engine.FrameMessageTaken); f.ID != "m1" {
			t.Fatalf("message.taken %s", f.Raw)
		}
		fence(true)
		close(w.release)
		s := takenOver(t, h, fence)
		p, err := s.Attach(context.Background(), engine.AttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Detach()
		if err := p.SendOnce(context.Background(), "m1", "hello"); err != nil { // a copy: confirmed, not taken again
			t.Fatal(err)
		}
		waitUntil(t, "the reply", func() bool {
			tr, _ := s.Transcript(context.Background())
			return len(tr) > 0 && tr[len(tr)-1].Content == "ok"
		})
		if tr, _ := s.Transcript(context.Background()); len(tr) != 2 {
			t.Errorf("transcript %+v, want the message and its reply once", tr)
		}
	})
	t.Run("guard.tripped once", func(t *testing.T) {
		store, fence := fenceable()
		w := newSlowWorker(engine.TypeGuardTripped, engine.AgentTool{Name: "lookup"})
		w.agent.Limits = &engine.Limits{MaxModelTurns: 1}
		w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"r"`)}}}, nil
		}
		h := setup(t, &w.testWorker, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{Store: store})
		h.send("go")
		recv(t, w.arrived, "the guard.tripped decision")
		h.clock.Advance(slow) // stored, the guard still queued
		fence(true)
		close(w.release)
		s := takenOver(t, h, fence)
		if _, err := s.Transcript(context.Background()); err != nil { // the load's step is done
			t.Fatal(err)
		}
		n := 0
		for _, ev := range stored(t, store, h.s.ID()) {
			if ev.Type == engine.EventGuardTripped {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d guard.tripped events in the journal, want 1", n)
		}
	})
}

// TestAFencedStoreMeanwhileAsksNoMore: once the store made while a slow
// decision runs is fenced, this node does not run the session: it asks
// the worker about nothing more (here the message that waited for the
// turn), and the node that took the session over does (a review's case).
func TestAFencedStoreMeanwhileAsksNoMore(t *testing.T) {
	store, fence := fenceable()
	w := newSlowWorker(engine.TypeModelFinished)
	turn := make(chan struct{})
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		select {
		case <-turn:
		case <-ctx.Done():
		}
		return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
	}}
	h := setup(t, &w.testWorker, m, engine.Options{Store: store})
	h.send("one")
	waitUntil(t, "the model turn", func() bool { return len(m.requests()) == 1 })
	h.send("two") // waits for the turn
	close(turn)
	recv(t, w.arrived, "the model.finished decision")
	fence(true)
	h.clock.Advance(250 * time.Millisecond) // the store meanwhile: fenced
	close(w.release)
	waitUntil(t, "the fenced session to leave memory", func() bool { _, in := h.e.Session(h.s.ID()); return !in })
	for _, r := range w.requests(engine.TypeMessage) {
		if um := r.Trigger.(engine.UserMessage); um.Message.Content == "two" {
			t.Errorf("the fenced node asked the worker about %q", um.Message.Content)
		}
	}
}

// TestASlowSubAgentDecisionStoresNothingMidDecision: a decision that starts
// a call and delegates ([tool.call pay, tool.delegate]) has the sub-agent's
// first decision asked in its middle, before its calls are launched. A
// store then, should that decision be slow, would hold a call at attempt
// 0 with no approval asked, which a node taking the session over would
// run: pay declares approval "always" (a review's case). Nothing is
// stored there; and a call found so is launched, its approval asked.
func TestASlowSubAgentDecisionStoresNothingMidDecision(t *testing.T) {
	store, fence := fenceable()
	var holding atomic.Bool
	holding.Store(true)
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	var payRuns atomic.Int32
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "research"}, {Name: "pay", Approval: engine.ApprovalAlways}}}}
	w.execute = func(ctx context.Context, te engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		switch te.Name {
		case "research":
			return engine.Decision{Actions: []engine.Action{
				engine.ToolCall{Name: "pay", Arguments: json.RawMessage(`{}`)},
				engine.ToolDelegate{Agent: engine.AgentConfig{Model: "fake-model"}},
			}}, nil
		case "pay":
			payRuns.Add(1)
		}
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"done"`)}}}, nil
	}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		}
		if _, ok := req.Trigger.(engine.UserMessage); ok && req.Parent != nil && holding.Load() {
			done := ctx.Done()
			arrived <- struct{}{}
			select {
			case <-release:
			case <-done:
			}
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "research", `{}`)), engine.Options{Store: store})
	h.send("go")
	recv(t, arrived, "the sub-agent's first decision")
	h.clock.Advance(250 * time.Millisecond)
	fence(true)
	holding.Store(false)
	close(release)
	takenOver(t, h, fence)
	// The journal holds the step before research's decision, which the
	// take-over settles as interrupted (not idempotent), and the session
	// goes idle; or, stored in the decision's middle, pay, which must ask
	// its approval (the session waits), not run (it settles, then idle).
	var approvals int
	waitUntil(t, "the session idle, or pay asking its approval", func() bool {
		evs := stored(t, store, h.s.ID())
		approvals = 0
		for _, ev := range evs {
			if ev.Type == engine.EventToolApproval {
				approvals++
			}
		}
		return approvals > 0 || evs[len(evs)-1].Type == engine.EventSessionIdle
	})
	if n := payRuns.Load(); n > 0 {
		t.Errorf("pay ran %d times after the take-over, with %d tool.approval events: it asks approval always", n, approvals)
	}
}
