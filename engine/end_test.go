package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
// the log says so at WARN; it hung without a word.
func TestToolExecuteLeftOpenIsSaid(t *testing.T) {
	logs := &testlog.Buffer{}
	w := &testWorker{agent: engine.AgentConfig{Model: "m", Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
		return proposed, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h.send("look it up")
	waitUntil(t, "the warning", func() bool {
		return strings.Contains(logs.String(), "neither answers nor delegates the call") && strings.Contains(logs.String(), "call=call_1")
	})
	if n := h.count(engine.EventToolFinished, "call_1"); n != 0 {
		t.Errorf("the call settled %d times before its deadline", n)
	}
}

// TestPageInterrupts: a page that Interrupts (an HTTP front end's new
// message) stops a turn that waits on nothing but the user (a client call,
// an approval) as it attaches, its calls settled as cancelled and none
// delivered to it, and its message starts the next turn; a turn that waits
// on the server (a worker's attempt) is left alone, and the message waits
// for it.
func TestPageInterrupts(t *testing.T) {
	tools := []engine.AgentTool{
		{Name: "get_location", Handler: engine.HandlerClient},
		{Name: "lookup"},
		{Name: "pay", Approval: engine.ApprovalAlways},
	}
	for _, tc := range []struct {
		name    string
		uses    []model.ToolUse
		waitFor string // the event that shows the turn waits
		stops   bool
	}{
		{"a client call waits for its answer", []model.ToolUse{use("loc", "get_location", `{}`)}, "", true},
		{"a worker's call waits for its approval", []model.ToolUse{use("p", "pay", `{}`)}, engine.EventToolApproval, true},
		{"a client call waits beside a worker's that runs", []model.ToolUse{use("loc", "get_location", `{}`), use("look", "lookup", `{}`)}, engine.EventToolStarted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrowser()
			running := make(chan struct{}, 1)
			w := &testWorker{agent: engine.AgentConfig{Tools: tools}}
			w.execute = func(ctx context.Context, x engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				running <- struct{}{}
				<-ctx.Done()
				return engine.Decision{}, ctx.Err()
			}
			m := callsThenSummary(tc.uses...)
			calls := m.reply
			m.reply = func(ctx context.Context, req model.Request) (model.Response, error) {
				if last := req.Messages[len(req.Messages)-1]; last.Content == "never mind" {
					return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
				}
				return calls(ctx, req)
			}
			h := setup(t, w, m, engine.Options{}, b)
			h.send("go")
			if tc.waitFor == "" {
				recv(t, b.calls, "the client call")
			} else {
				h.waitType(tc.waitFor)
			}
			if !tc.stops {
				recv(t, running, "the worker's attempt")
			}
			// The app's page: it runs the client tool, and gets the outcomes.
			app := newBrowser()
			page, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), AnyClientTool: true, Handoff: true, Interrupts: true})
			if err != nil {
				t.Fatal(err)
			}
			defer page.Detach()
			appSaw := pump(t, page, app)
			if err := page.Send(context.Background(), "never mind"); err != nil {
				t.Fatal(err)
			}
			if !tc.stops {
				h.transcript() // a barrier: the message's step ran
				if n := h.count(engine.EventToolFinished, ""); n != 0 {
					t.Fatalf("%d calls settled while a worker's ran; seen %s", n, h.types())
				}
				if n := len(h.model.requests()); n != 1 {
					t.Fatalf("the model was prompted %d times, want 1: the message waits", n)
				}
				return
			}
			fin := h.waitType(engine.EventToolFinished)
			if fin.OK || fin.Code != string(engine.CodeCancelled) || !strings.Contains(fin.Error, "the user sent a new message instead of answering") {
				t.Errorf("tool.finished %s, want cancelled by the new message", fin.Raw)
			}
			if tc.waitFor == "" {
				if r := recv(t, b.releases, "tool.cancel"); r != (release{ID: "loc", Attempt: 1, Reason: engine.CancelCancelled}) {
					t.Errorf("release %+v, want the page's attempt cancelled", r)
				}
			}
			user := h.waitFor("the new message", func(f frame) bool { return f.Type == engine.EventMessage && f.msg(t).Role == model.RoleUser })
			if c := user.msg(t).Content; c != "never mind" {
				t.Errorf("user message %q", c)
			}
			h.waitIdle()
			appSaw.sync()
			if len(app.calls) != 0 {
				t.Errorf("the cancelled call was delivered to the app's page: %+v", <-app.calls)
			}
			var outcome bool
			for len(appSaw.C()) > 0 {
				f := decodeFrame(t, <-appSaw.C())
				outcome = outcome || (f.Type == engine.EventToolFinished && f.Code == string(engine.CodeCancelled))
			}
			if !outcome {
				t.Error("the app's page was not told the call was cancelled")
			}
			reqs := h.model.requests()
			if len(reqs) != 2 {
				t.Fatalf("the model was prompted %d times, want 2 (the turn, then the new message's)", len(reqs))
			}
			msgs := reqs[1].Messages
			if last := msgs[len(msgs)-1]; last.Role != model.RoleUser || last.Content != "never mind" {
				t.Errorf("the new turn's last message %+v", last)
			}
			if tm := toolMessages(msgs); len(tm) != 1 || !tm[0].IsError || !strings.Contains(tm[0].Content, "instead of answering") {
				t.Errorf("the model saw tool messages %+v, want the cancelled call", tm)
			}
		})
	}
}
