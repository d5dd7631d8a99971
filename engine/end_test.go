package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/testlog"
)

// TestCancel: Session.Cancel stops the model turn and every open call with
// code cancelled; the worker's context is cancelled, the browser is told,
// the outcomes join the transcript, and the model is not re-prompted.
func TestCancel(t *testing.T) {
	b := newBrowser()
	workerCtx := make(chan context.Context, 1)
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}, {Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		workerCtx <- ctx
		<-ctx.Done()
		// A late answer after the cancel: ignored.
		return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"too late"`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("loc", "get_location", `{}`), use("look", "lookup", `{}`)), engine.Options{}, b)
	h.send("go")
	recv(t, b.calls, "client dispatch")
	ctx := recv(t, workerCtx, "tool.execute")
	if err := h.s.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"loc", "look"} { // settled in call order
		fin := h.waitType(engine.EventToolFinished)
		if fin.ID != id || fin.OK || fin.Code != string(engine.CodeCancelled) || !strings.Contains(fin.Error, "was cancelled: cancelled by the user") {
			t.Errorf("tool.finished %s, want %s cancelled", fin.Raw, id)
		}
	}
	if r := recv(t, b.releases, "release"); r != (release{ID: "loc", Attempt: 1, Reason: engine.CancelCancelled}) {
		t.Errorf("release %+v, want abort", r)
	}
	recv(t, ctx.Done(), "worker context cancelled")
	h.waitIdle()
	if reqs := h.model.requests(); len(reqs) != 1 {
		t.Errorf("the model was prompted %d times after cancel, want 1", len(reqs))
	}
	tr := h.transcript()
	tm := toolMessages(tr)
	if len(tm) != 2 || tm[0].ToolUseID != "loc" || tm[1].ToolUseID != "look" || !tm[0].IsError || !tm[1].IsError {
		t.Errorf("transcript tool messages %+v", tm)
	}
	for _, m := range tm {
		if strings.Contains(m.Content, "too late") {
			t.Errorf("a late answer reached the transcript: %+v", m)
		}
	}
	if len(b.releases) != 0 {
		t.Errorf("extra releases: %d", len(b.releases))
	}
}

// TestCancelModelTurn: Cancel stops a running model turn.
func TestCancelModelTurn(t *testing.T) {
	running := make(chan struct{})
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		close(running)
		<-ctx.Done()
		return model.Response{Text: "partial"}, ctx.Err()
	}}
	h := setup(t, &testWorker{}, m, engine.Options{})
	h.send("talk forever")
	recv(t, running, "model turn")
	if err := h.s.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	fin := h.waitType(engine.EventModelFinished)
	if fin.StopReason != model.StopCancelled {
		t.Errorf("model.finished %s", fin.Raw)
	}
	h.waitIdle()
	if n := h.count(engine.EventError, ""); n != 0 {
		t.Errorf("a cancelled turn reported %d errors", n)
	}
}

// TestEnd: ending the session cancels its open calls (the browser is told,
// the worker's context ends), tells the worker and the subscribers, and
// refuses further input.
func TestEnd(t *testing.T) {
	b := newBrowser()
	workerCtx := make(chan context.Context, 1)
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}, {Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		workerCtx <- ctx
		<-ctx.Done()
		return engine.Decision{}, ctx.Err()
	}
	h := setup(t, w, callsThenSummary(use("loc", "get_location", `{}`), use("look", "lookup", `{}`)), engine.Options{}, b)
	h.send("go")
	recv(t, b.calls, "client dispatch")
	ctx := recv(t, workerCtx, "tool.execute")
	h.s.End(context.Background(), "bye")
	recv(t, h.s.Done(), "session done")
	recv(t, ctx.Done(), "worker context cancelled")
	if r := recv(t, b.releases, "release"); r != (release{ID: "loc", Attempt: 1, Reason: engine.CancelCancelled}) {
		t.Errorf("release %+v", r)
	}
	for _, id := range []string{"loc", "look"} {
		fin := h.waitType(engine.EventToolFinished)
		if fin.ID != id || fin.Code != string(engine.CodeCancelled) || !strings.Contains(fin.Error, "the session ended") {
			t.Errorf("tool.finished %s, want %s cancelled", fin.Raw, id)
		}
	}
	ended := h.waitType(engine.EventSessionEnded)
	if ended.Reason != "bye" {
		t.Errorf("session.ended %s", ended.Raw)
	}
	recv(t, h.sub.Done(), "subscription end")
	if !errors.Is(h.sub.Err(), engine.ErrSessionClosed) {
		t.Errorf("subscription error %v", h.sub.Err())
	}
	ends := w.requests(engine.TypeSessionEnd)
	if len(ends) != 1 || ends[0].Trigger.(engine.SessionEnd).Reason != "bye" {
		t.Errorf("session.end triggers %+v", ends)
	}
	if err := h.s.Send(context.Background(), "hello?"); !errors.Is(err, engine.ErrSessionClosed) {
		t.Errorf("Send after End: %v", err)
	}
	if err := h.s.Answer(context.Background(), engine.ToolResult{ID: "loc", Attempt: 1, Result: json.RawMessage(`1`)}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Errorf("Answer after End: %v", err)
	}
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Errorf("Attach after End: %v", err)
	}
	if _, ok := h.e.Session(h.s.ID()); ok || h.e.Loaded() != 0 {
		t.Error("the engine still lists the session")
	}
	h.s.End(context.Background(), "again") // harmless
}

// TestEndActionAndEngineClose: a worker's session.end action ends the
// session; Engine.Close ends the rest and refuses new sessions.
func TestEndActionAndEngineClose(t *testing.T) {
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch t := req.Trigger.(type) {
		case engine.SessionStart:
			return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
		case engine.UserMessage:
			if t.Message.Content == "bye" {
				return engine.Decision{Actions: []engine.Action{engine.EndSession{Reason: "the user left"}}}, nil
			}
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{})
	other, err := h.e.Open(context.Background(), engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.e.Loaded() != 2 {
		t.Fatalf("%d sessions", h.e.Loaded())
	}
	h.send("bye")
	if ev := h.waitType(engine.EventSessionEnded); ev.Reason != "the user left" {
		t.Errorf("session.ended %s", ev.Raw)
	}
	recv(t, h.s.Done(), "session done")
	if err := h.e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	recv(t, other.Done(), "other session done")
	if _, err := h.e.Open(context.Background(), engine.OpenOptions{}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Errorf("Open after Close: %v", err)
	}
}

// TestClientEventAction: client.event is pushed to the session's browsers.
func TestClientEventAction(t *testing.T) {
	w := &testWorker{}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "m"}}, nil
		}
		return engine.Decision{Actions: []engine.Action{engine.ClientEvent{Name: "confetti", Data: json.RawMessage(`{"n":3}`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{})
	h.send("party")
	ev := h.waitType(engine.EventClientEvent)
	if ev.Name != "confetti" || string(ev.Data) != `{"n":3}` || string(ev.Raw) != fmt.Sprintf(`{"type":"client.event","seq":%d,"name":"confetti","data":{"n":3}}`, ev.Seq) {
		t.Errorf("client.event %s", ev.Raw)
	}
	// The worker held the message: the session still reports idle.
	h.waitIdle()
}

// TestAgentFromAToolExecuteDecision: the agent a worker sends with its
// answer to tool.execute replaces the session's, as from any other
// trigger (a login tool that unlocks more tools), and a bad one is refused
// with bad_config; it was dropped without a word.
func TestAgentFromAToolExecuteDecision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent engine.AgentConfig
		check func(t *testing.T, h *harness, m *fakeModel)
	}{
		{"a new tool", engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "login"}, {Name: "secret"}}}, func(t *testing.T, h *harness, m *fakeModel) {
			h.waitIdle()
			var names []string
			for _, tool := range m.last(t).Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, " "); got != "login secret" {
				t.Errorf("the model's tools after the login: %q, want login secret", got)
			}
		}},
		{"a bad one", engine.AgentConfig{Tools: []engine.AgentTool{{Name: "login"}}}, func(t *testing.T, h *harness, m *fakeModel) {
			if f := h.waitType(engine.EventError); f.Code != string(engine.WireBadConfig) {
				t.Errorf("the error: %s, want bad_config", f.Raw)
			}
			h.waitIdle()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &testWorker{agent: engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "login"}}}}
			w.execute = func(ctx context.Context, tr engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				agent := tc.agent
				return engine.Decision{Agent: &agent, Actions: []engine.Action{engine.ToolResult{ID: tr.ID, Result: json.RawMessage(`"welcome"`)}}}, nil
			}
			m := callsThenSummary(use("call_1", "login", `{}`))
			h := setup(t, w, m, engine.Options{})
			h.send("log me in")
			tc.check(t, h, m)
		})
	}
}

// TestToolExecuteLeftOpenIsSaid: a worker's answer to tool.execute that
// neither answers nor delegates the call (proposed, {}, returned for a tool
// it runs) leaves the attempt open until its deadline, as documented, and
// the log and the pages say so, naming the call and the deadline: it hung
// without a word, and then with one in the log alone (an outside audit's
// worker waited 5 minutes with a page that showed nothing). An answer of
// hold leaves it open on purpose, and one refused for a fault of its own
// (another call's id) is said once, for that fault.
func TestToolExecuteLeftOpenIsSaid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer []engine.Action
		said   string // the one error event's text; "": none
	}{
		{"proposed, as it came", nil, `lookup (call "call_1", attempt 1) neither answers nor delegates the call: it stays open until its attempt's deadline, `},
		{"hold", []engine.Action{engine.Hold{}}, ""},
		{"the session's end", []engine.Action{engine.EndSession{Reason: "done"}}, ""},
		{"an answer for another call", []engine.Action{engine.ToolResult{ID: "call_9", Result: json.RawMessage(`1`)}}, `unknown tool call: "call_9"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testlog.Buffer{}
			w := &testWorker{agent: engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "lookup"}}}}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
				// The client.event marks the decision's step on the stream.
				return engine.Decision{Actions: append(append(proposed.Actions, engine.ClientEvent{Name: "decided"}), tc.answer...)}, nil
			}
			h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			h.send("look it up")
			call := h.waitType(engine.EventToolStarted)
			h.waitType(engine.EventClientEvent)
			ends := slices.ContainsFunc(tc.answer, func(a engine.Action) bool { _, ok := a.(engine.EndSession); return ok })
			if ends {
				h.waitType(engine.EventSessionEnded) // its calls cancelled with it
				h.drainBuffered()
			} else {
				h.transcript() // the step that took the decision has ended
			}
			h.drainBuffered()
			var said []frame
			var texts []string
			for _, f := range h.seen {
				if f.Type == engine.EventError {
					said, texts = append(said, f), append(texts, f.errorText())
				}
			}
			switch {
			case tc.said == "" && len(said) != 0:
				t.Errorf("the pages were told %s", said[0].Raw)
			case tc.said != "" && (len(said) != 1 || said[0].Code != "bad_decision" || !strings.Contains(said[0].errorText(), tc.said)):
				t.Errorf("the pages were told %d errors %q; want one, bad_decision, saying %q", len(said), texts, tc.said)
			case strings.Contains(tc.said, "deadline") && !strings.Contains(said[0].errorText(), call.Deadline):
				t.Errorf("the error %q does not name the deadline %q", said[0].errorText(), call.Deadline)
			case tc.said != "" && !strings.Contains(logs.String(), "level=WARN"):
				t.Errorf("the log says nothing at WARN:\n%s", logs.String())
			}
			if ends {
				return
			}
			if n := h.count(engine.EventToolFinished, "call_1"); n != 0 {
				t.Errorf("the call settled %d times before its deadline", n)
			}
		})
	}
}

// TestPageInterrupts: a page that Interrupts (an HTTP front end's new
// message) settles as cancelled the calls that wait on the app as it
// attaches (a client call an earlier response's page took and left with, an
// approval no other page can give), none delivered to it; their turn does
// not prompt the model again, its server work goes on, and the message
// starts the next turn. A call a /ws page runs is left to it.
func TestPageInterrupts(t *testing.T) {
	tools := []engine.AgentTool{
		{Name: "get_location", Handler: engine.HandlerClient},
		{Name: "lookup"},
		{Name: "pay", Approval: engine.ApprovalAlways},
	}
	for _, tc := range []struct {
		name       string
		uses       []model.ToolUse
		stays      bool // the first page stays attached, running the client call
		ws         bool // it is a /ws page (no Handoff), not a front end's response
		worker     bool // a worker's attempt runs beside
		cancelled  []string
		wantPrompt int // model requests in all
	}{
		{name: "a client call its page left with", uses: []model.ToolUse{use("loc", "get_location", `{}`)}, cancelled: []string{"loc"}, wantPrompt: 2},
		{name: "an approval no page gives", uses: []model.ToolUse{use("p", "pay", `{}`)}, cancelled: []string{"p"}, wantPrompt: 2},
		{name: "a client call beside a worker's that runs", uses: []model.ToolUse{use("loc", "get_location", `{}`), use("look", "lookup", `{}`)}, worker: true, cancelled: []string{"loc"}, wantPrompt: 2},
		{name: "a client call whose response's page has not left yet", uses: []model.ToolUse{use("loc", "get_location", `{}`)}, stays: true, cancelled: []string{"loc"}, wantPrompt: 2},
		{name: "a client call a /ws page runs", uses: []model.ToolUse{use("loc", "get_location", `{}`)}, stays: true, ws: true, wantPrompt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			finish := make(chan struct{})
			w := &testWorker{agent: engine.AgentConfig{Tools: tools}}
			w.execute = func(ctx context.Context, x engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				select {
				case <-finish:
				case <-ctx.Done():
					return engine.Decision{}, ctx.Err()
				}
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
			}
			m := callsThenSummary(tc.uses...)
			calls := m.reply
			m.reply = func(ctx context.Context, req model.Request) (model.Response, error) {
				if last := req.Messages[len(req.Messages)-1]; last.Content == "never mind" {
					return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
				}
				return calls(ctx, req)
			}
			h := setup(t, w, m, engine.Options{})
			h.page.Detach() // the pages are the front end's alone
			// The first response's page: it gets the client call, and
			// leaves with it (Handoff) unless it stays.
			first := newBrowser()
			p1, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), AnyClientTool: true, Handoff: !tc.ws})
			if err != nil {
				t.Fatal(err)
			}
			firstSaw := pump(t, p1, first)
			if err := p1.Send(context.Background(), "go"); err != nil {
				t.Fatal(err)
			}
			if tc.uses[0].Name == "pay" {
				until(t, firstSaw, "the approval", func(f frame) bool { return f.Type == engine.EventToolApproval })
			} else {
				recv(t, first.calls, "the client call")
			}
			if tc.worker {
				until(t, firstSaw, "the worker's call", func(f frame) bool { return f.Type == engine.EventToolStarted && f.ID == "look" })
			}
			if !tc.stays {
				p1.Detach()
			}
			h.transcript() // a barrier: the page's leaving is handled
			app := newBrowser()
			p2, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), AnyClientTool: true, Handoff: true, Interrupts: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p2.Detach()
			appSaw := pump(t, p2, app)
			if err := p2.Send(context.Background(), "never mind"); err != nil {
				t.Fatal(err)
			}
			finished := func(id string) frame {
				return until(t, appSaw, "tool.finished "+id, func(f frame) bool { return f.Type == engine.EventToolFinished && f.ID == id })
			}
			for _, id := range tc.cancelled {
				fin := finished(id)
				if fin.OK || fin.Code != string(engine.CodeCancelled) || !strings.Contains(fin.Error, "the user sent a new message instead of answering") {
					t.Errorf("tool.finished %s, want cancelled by the new message", fin.Raw)
				}
			}
			if tc.worker {
				close(finish)
				if fin := finished("look"); !fin.OK {
					t.Errorf("the worker's call %s, want it to go on and finish", fin.Raw)
				}
			}
			if tc.ws {
				h.transcript()
				appSaw.sync()
				for len(appSaw.C()) > 0 {
					if f := decodeFrame(t, <-appSaw.C()); f.Type == engine.EventToolFinished {
						t.Fatalf("%s settled, want the attached page's call left to it", f.Raw)
					}
				}
			} else {
				until(t, appSaw, "the new message's reply", func(f frame) bool { return f.Type == engine.EventMessage && f.msg(t).Content == "ok" })
				until(t, appSaw, "the end of its turn", func(f frame) bool { return f.Type == engine.EventSessionIdle })
			}
			appSaw.sync()
			if len(app.calls) != 0 {
				t.Errorf("a call was delivered to the interrupting page: %+v", <-app.calls)
			}
			if n := len(h.model.requests()); n != tc.wantPrompt {
				t.Errorf("the model was prompted %d times, want %d (the stopped turn not again)", n, tc.wantPrompt)
			}
		})
	}
}

// until reads st's events until one satisfies ok, and returns it.
func until(t tb, st *stream, what string, ok func(frame) bool) frame {
	t.Helper()
	for {
		select {
		case ev := <-st.C():
			if f := decodeFrame(t, ev); ok(f) {
				return f
			}
		case <-time.After(hangGuard):
			t.Fatalf("no %s after %s", what, hangGuard)
		}
	}
}

// TestPageInterruptsWithARefusedMessage: a page that Interrupts with a
// message the session refuses (over its length) fails to attach with that
// refusal, and stops nothing: the call its message would have typed past
// still waits.
func TestPageInterruptsWithARefusedMessage(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}}
	h := setup(t, w, callsThenSummary(use("loc", "get_location", `{}`)), engine.Options{MaxMessageBytes: 100})
	h.page.Detach()
	first := newBrowser()
	p1, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), AnyClientTool: true, Handoff: true})
	if err != nil {
		t.Fatal(err)
	}
	pump(t, p1, first)
	if err := p1.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	recv(t, first.calls, "the client call")
	p1.Detach()
	h.transcript() // a barrier: the page's leaving is handled
	_, err = h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), AnyClientTool: true, Handoff: true, Interrupts: true, Message: strings.Repeat("x", 101)})
	if !errors.Is(err, engine.ErrLimitExceeded) {
		t.Fatalf("Attach with a message over the limit: %v, want ErrLimitExceeded", err)
	}
	for _, m := range h.transcript() {
		if m.Role == model.RoleTool {
			t.Fatalf("the call settled (%q): a refused message stopped it", m.Content)
		}
	}
}
