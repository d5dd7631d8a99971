package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// A sub-agent's tests: a root agent on "fake-model" calls the worker tool
// research, which the worker delegates to a helper agent on "helper-model".

// parentOf is the "parent" of a frame: the call whose sub-agent published it.
func parentOf(f frame) string {
	var p struct{ Parent string }
	_ = json.Unmarshal(f.Raw, &p)
	return p.Parent
}

// models resolves "helper-model" to helper and anything else to root.
func models(root, helper model.Model) model.Resolver {
	return model.ResolverFunc(func(id string) (model.Model, error) {
		if id == "helper-model" {
			return helper, nil
		}
		return root, nil
	})
}

// helperAgent is the sub-agent's config: get_weather on the worker, and the
// page's get_local_time.
var helperAgent = engine.AgentConfig{
	Model:  "helper-model",
	System: "You research the weather.",
	Tools: []engine.AgentTool{
		{Name: "get_weather", Input: engine.Schema(weatherInput)},
		{Name: "get_local_time", Handler: engine.HandlerClient, Output: engine.Schema(`{"type":"object","required":["time"]}`)},
	},
}

// delegating is a worker whose research calls run helperAgent and whose
// get_weather answers "sunny in <city>".
func delegating(research engine.AgentTool) *testWorker {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{research}}}
	w.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
		switch t.Name {
		case "research":
			return engine.Decision{Actions: []engine.Action{engine.ToolDelegate{Agent: helperAgent}}}, nil
		case "get_weather":
			var in struct{ City string }
			_ = json.Unmarshal(t.Input.Value, &in)
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"sunny in ` + in.City + `"`)}}}, nil
		}
		return proposed, nil
	}
	return w
}

// helperAndRoot answers the helper agent's requests (helperAgent's model)
// with helper, and the others with root: one model for a rig's engine.
func helperAndRoot(helper, root model.Model) *fakeModel {
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if req.Model == helperAgent.Model {
			return helper.Generate(ctx, req, func(string) {})
		}
		return root.Generate(ctx, req, func(string) {})
	}}
}

// TestSubagentResult: the helper's final message is the call's result; its
// events reach the page nested under the call; its triggers carry Parent;
// its transcript is its own.
func TestSubagentResult(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{"cities":["A","B","C"]}`))
	helper := callsThenSummary(
		use("call_1", "get_weather", `{"city":"A"}`),
		use("call_2", "get_weather", `{"city":"B"}`),
		use("call_3", "get_weather", `{"city":"C"}`))
	w := delegating(engine.AgentTool{Name: "research", Output: engine.Schema(`{"type":"string"}`)})
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	h.send("research the weather in three cities")

	fin := h.waitFor("research's tool.finished", func(f frame) bool {
		return f.Type == engine.EventToolFinished && f.ID == "call_1" && parentOf(f) == ""
	})
	if !fin.OK || fin.Result != "saw: sunny in A | sunny in B | sunny in C" {
		t.Fatalf("research finished %s, want the helper's summary", fin.Raw)
	}
	h.waitIdle()

	// The helper's first message is the call's arguments, under its own system prompt.
	first := helper.requests()[0]
	if first.System != helperAgent.System || len(first.Messages) != 1 || first.Messages[0].Content != `{"cities":["A","B","C"]}` {
		t.Errorf("the helper's first request: system %q, messages %+v", first.System, first.Messages)
	}
	// The page saw the helper's work under call_1: its calls (with ids of
	// their own: call_1 was taken), its text, and the delegation.
	nestedStarts, nestedText := 0, ""
	for _, f := range h.seen {
		if parentOf(f) != "call_1" {
			continue
		}
		switch f.Type {
		case engine.EventToolStarted:
			nestedStarts++
			if f.ID == "call_1" {
				t.Errorf("a helper's call reuses the id of the call it answers: %s", f.Raw)
			}
		case engine.EventModelDelta:
			nestedText += f.Text
		case engine.EventSessionIdle:
			t.Errorf("the helper published session.idle: %s", f.Raw)
		}
	}
	if nestedStarts != 3 || nestedText != "saw: sunny in A | sunny in B | sunny in C" {
		t.Errorf("nested under call_1: %d tool.started, text %q; seen %s", nestedStarts, nestedText, h.types())
	}
	if h.count(engine.EventToolDelegated, "call_1") != 1 {
		t.Errorf("want one tool.delegated for call_1; seen %s", h.types())
	}
	// The worker knew which triggers were the helper's.
	for _, r := range w.requests(engine.TypeToolExecute) {
		ex := r.Trigger.(engine.ToolExecute)
		switch {
		case ex.Name == "get_weather" && (r.Parent == nil || r.Parent.ID != "call_1" || r.Parent.Depth != 1):
			t.Errorf("get_weather's tool.execute has parent %+v, want call_1 at depth 1", r.Parent)
		case ex.Name == "research" && r.Parent != nil:
			t.Errorf("research's tool.execute has parent %+v, want none", r.Parent)
		}
	}
	// The session's transcript is the root agent's alone.
	tr := h.transcript()
	if len(tr) != 4 || tr[0].Content != "research the weather in three cities" || tr[2].Role != model.RoleTool || tr[3].Content != "saw: saw: sunny in A | sunny in B | sunny in C" {
		t.Errorf("session transcript %+v", tr)
	}
}

// TestSubagentResultChecked: the helper's answer is checked against the
// delegated tool's output schema like any result.
func TestSubagentResultChecked(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := callsThenSummary() // answers "ok"
	w := delegating(engine.AgentTool{Name: "research", Output: engine.Schema(`{"type":"object"}`)})
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	h.send("go")
	fin := h.waitFinished("call_1")
	if fin.OK || fin.Code != string(engine.CodeInvalidOutput) {
		t.Fatalf("research finished %s, want invalid_output", fin.Raw)
	}
}

// TestSubagentFailure: a helper whose model fails, or that a guard stops,
// settles the call with one terminal subagent_failed, though its policy
// allows retries.
func TestSubagentFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		helper *fakeModel
		limits *engine.Limits
		want   string
	}{
		{"model fails", &fakeModel{reply: func(context.Context, model.Request) (model.Response, error) {
			return model.Response{}, errors.New("provider down")
		}}, nil, "its model failed: provider down"},
		{"guard", callsThenSummary(use("w", "get_weather", `{"city":"A"}`)), &engine.Limits{MaxModelTurns: 1}, "Stopped: the model took 1 turn to answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := callsThenSummary(use("call_1", "research", `{}`))
			research := engine.AgentTool{Name: "research", Retry: &engine.RetryPolicy{Attempts: 3}}
			w := delegating(research)
			agent := helperAgent
			agent.Limits = tt.limits
			w.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
				if t.Name == "research" {
					return engine.Decision{Actions: []engine.Action{engine.ToolDelegate{Agent: agent}}}, nil
				}
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"sunny"`)}}}, nil
			}
			h := setup(t, w, root, engine.Options{Models: models(root, tt.helper)})
			h.send("go")
			fin := h.waitFinished("call_1")
			if fin.OK || fin.Code != string(engine.CodeSubagentFailed) || !strings.Contains(fin.Error, tt.want) {
				t.Fatalf("research finished %s, want subagent_failed: %s", fin.Raw, tt.want)
			}
			h.waitIdle()
			if n := h.count(engine.EventToolStarted, "call_1"); n != 1 {
				t.Errorf("research started %d times, want 1: a failed sub-agent is terminal", n)
			}
		})
	}
}

// blockingHelper is a helper model whose first turn waits for its context
// (reporting it on cut) and whose later turns answer "done".
func blockingHelper() (*fakeModel, chan struct{}, chan struct{}) {
	var mu sync.Mutex
	turns := 0
	started, cut := make(chan struct{}, 10), make(chan struct{}, 10)
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		mu.Lock()
		turns++
		n := turns
		mu.Unlock()
		if n > 1 {
			return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
		}
		started <- struct{}{}
		<-ctx.Done()
		cut <- struct{}{}
		return model.Response{}, ctx.Err()
	}}, started, cut
}

// TestSubagentTimeout: the call's attempt timing out ends its helper (the
// helper's model turn is cancelled); the retry delegates again, to a fresh
// helper, whose answer settles the call.
func TestSubagentTimeout(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper, started, cut := blockingHelper()
	w := delegating(engine.AgentTool{Name: "research", Retry: &engine.RetryPolicy{Attempts: 2, Timeout: "10s", Backoff: "1s"}})
	h := setup(t, w, root, engine.Options{Models: models(root, helper), Rand: func() float64 { return 0.5 }})
	h.send("go")
	recv(t, started, "the first helper's model turn")
	h.clock.Advance(10 * time.Second)
	recv(t, cut, "the first helper's turn cut by the timeout")
	// Its pages are told the helper's text ends there (an outside audit:
	// the next helper's text came under the same parent, nothing between).
	h.waitFor("the cut helper turn's model.finished", func(f frame) bool {
		return f.Type == engine.EventModelFinished && parentOf(f) == "call_1" && strings.Contains(string(f.Raw), `"stopReason":"cancelled"`)
	})
	h.waitType(engine.EventToolRetrying)
	h.transcript() // the retry's backoff timer is armed
	h.clock.Advance(5 * time.Second)
	fin := h.waitFinished("call_1")
	if !fin.OK || fin.Result != "done" {
		t.Fatalf("research finished %s, want the second helper's done", fin.Raw)
	}
	if n := h.count(engine.EventToolDelegated, "call_1"); n != 2 {
		t.Errorf("call_1 delegated %d times, want 2 (a fresh helper per attempt); seen %s", n, h.types())
	}
	if reqs := helper.requests(); len(reqs[1].Messages) != 1 {
		t.Errorf("the second helper's first request has %d messages, want 1: a fresh transcript", len(reqs[1].Messages))
	}
}

// TestSubagentClientTool: a helper's client call goes to the page that
// declared the tool, in a tool.call frame naming its parent; the page's
// answer settles it once, and the helper's answer settles the call.
func TestSubagentClientTool(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := callsThenSummary(use("t1", "get_local_time", `{}`))
	w := delegating(engine.AgentTool{Name: "research"})
	b := newBrowser()
	b.tools = []string{"get_local_time"}
	h := setup(t, w, root, engine.Options{Models: models(root, helper)}, b)
	h.send("go")
	cc := recv(t, b.calls, "the helper's tool.call")
	if cc.Name != "get_local_time" || cc.Parent != "call_1" || cc.Attempt != 1 {
		t.Fatalf("tool.call %+v, want get_local_time with parent call_1", cc)
	}
	// The output schema holds inside the helper too: a bad answer is not
	// taken as the result... (a repeat of a good one is refused: settle-once).
	ctx := context.Background()
	if err := h.page.Answer(ctx, engine.ToolResult{ID: cc.ID, Attempt: 1, Result: json.RawMessage(`{"time":"09:00"}`)}); err != nil {
		t.Fatalf("the page's answer: %v", err)
	}
	if err := h.page.Answer(ctx, engine.ToolResult{ID: cc.ID, Attempt: 1, Result: json.RawMessage(`{"time":"10:00"}`)}); !errors.Is(err, engine.ErrSettled) {
		t.Errorf("a second answer: %v, want ErrSettled", err)
	}
	fin := h.waitFinished("call_1")
	if !fin.OK || fin.Result != `saw: {"time":"09:00"}` {
		t.Fatalf("research finished %s, want the helper's summary of the page's answer", fin.Raw)
	}
}

// TestSubagentClientOutputChecked: a helper's client call whose answer
// violates its output schema settles invalid_output, as at the top.
func TestSubagentClientOutputChecked(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := callsThenSummary(use("t1", "get_local_time", `{}`))
	b := newBrowser()
	b.tools = []string{"get_local_time"}
	h := setup(t, delegating(engine.AgentTool{Name: "research"}), root, engine.Options{Models: models(root, helper)}, b)
	h.send("go")
	cc := recv(t, b.calls, "the helper's tool.call")
	h.answer(engine.ToolResult{ID: cc.ID, Attempt: 1, Result: json.RawMessage(`"nine"`)})
	fin := h.waitFinished(cc.ID)
	if fin.OK || fin.Code != string(engine.CodeInvalidOutput) || parentOf(fin) != "call_1" {
		t.Fatalf("the helper's call finished %s, want invalid_output under call_1", fin.Raw)
	}
}

// TestSubagentCancel: cancelling the turn ends the helper: its page call
// gets tool.cancel and settles cancelled, and so does the call it answers.
func TestSubagentCancel(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := callsThenSummary(use("t1", "get_local_time", `{}`))
	b := newBrowser()
	b.tools = []string{"get_local_time"}
	h := setup(t, delegating(engine.AgentTool{Name: "research"}), root, engine.Options{Models: models(root, helper)}, b)
	h.send("go")
	cc := recv(t, b.calls, "the helper's tool.call")
	if err := h.page.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	rel := recv(t, b.releases, "tool.cancel of the helper's call")
	if rel.ID != cc.ID || rel.Reason != engine.CancelCancelled {
		t.Errorf("tool.cancel %+v, want %s cancelled", rel, cc.ID)
	}
	child := h.waitFinished(cc.ID)
	parent := h.waitFinished("call_1")
	if child.Code != string(engine.CodeCancelled) || parent.Code != string(engine.CodeCancelled) {
		t.Errorf("finished: helper's call %s, research %s; want both cancelled", child.Raw, parent.Raw)
	}
	h.waitIdle()
	if err := h.page.Answer(context.Background(), engine.ToolResult{ID: cc.ID, Attempt: 1, Result: json.RawMessage(`{"time":"1"}`)}); !errors.Is(err, engine.ErrStaleAttempt) {
		t.Errorf("an answer after the cancel: %v, want ErrStaleAttempt", err)
	}
	if n := len(helper.requests()); n != 1 {
		t.Errorf("the helper was prompted %d times, want 1: it ended with the call", n)
	}
}

// TestSubagentDepthLimit: a helper that delegates again nests up to
// MaxDepth; the delegation past it settles subagent_failed, and the
// answers climb back up.
func TestSubagentDepthLimit(t *testing.T) {
	m := callsThenSummary(use("call_1", "research", `{}`)) // every agent calls research
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "research"}}}}
	w.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
		return engine.Decision{Actions: []engine.Action{engine.ToolDelegate{Agent: engine.AgentConfig{
			Model: "fake-model", Tools: []engine.AgentTool{{Name: "research"}}}}}}, nil
	}
	h := setup(t, w, m, engine.Options{MaxDepth: 2})
	h.send("go")
	fin := h.waitFinished("call_1")
	h.waitIdle()
	if !fin.OK || !strings.Contains(fin.Result, "sub-agents may nest 2 deep") {
		t.Errorf("research finished %s, want the answer of the depth-2 helper about the limit", fin.Raw)
	}
	failed, deepest := 0, 0
	for _, f := range h.seen {
		if f.Type == engine.EventToolFinished && f.Code == string(engine.CodeSubagentFailed) {
			failed++
		}
	}
	for _, r := range w.requests(engine.TypeToolExecute) {
		if r.Parent != nil && r.Parent.Depth > deepest {
			deepest = r.Parent.Depth
		}
	}
	if failed != 1 || deepest != 2 {
		t.Errorf("%d calls failed (want 1), the deepest tool.execute was at depth %d (want 2); seen %s", failed, deepest, h.types())
	}
}

// TestSubagentFanOut: past MaxFanOut sub-agents running at once, a
// delegation settles subagent_failed.
func TestSubagentFanOut(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`), use("call_2", "research", `{}`))
	helper, started, _ := blockingHelper()
	h := setup(t, delegating(engine.AgentTool{Name: "research"}), root, engine.Options{Models: models(root, helper), MaxFanOut: 1})
	h.send("go")
	recv(t, started, "the first helper")
	// Which of the two delegates first is the worker's race: the other fails.
	fin := h.waitFor("a research's tool.finished", func(f frame) bool {
		return f.Type == engine.EventToolFinished && parentOf(f) == ""
	})
	if fin.OK || fin.Code != string(engine.CodeSubagentFailed) || !strings.Contains(fin.Error, "has 1 sub-agent running, the most it may") {
		t.Errorf("the second research finished %s, want subagent_failed by the fan-out limit", fin.Raw)
	}
}

// TestSubagentRestart: a sub-agent does not survive a restart; the call it
// answered resumes as any worker call does: delegated again to a fresh
// helper when its tool is idempotent, else settled interrupted. Either way
// it settles once, and the session's transcript holds none of the helper's
// messages.
func TestSubagentRestart(t *testing.T) {
	yes := true
	for _, tt := range []struct {
		name       string
		idempotent *bool
		want       string
	}{
		{"idempotent", &yes, "done"},
		{"not declared", nil, string(engine.CodeInterrupted)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, r *rig) {
				root := callsThenSummary(use("call_1", "research", `{}`))
				helper, started, _ := blockingHelper()
				w := delegating(engine.AgentTool{Name: "research", Idempotent: tt.idempotent})
				both := helperAndRoot(helper, root)
				e1 := r.start(w, both)
				s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
				p1 := attach(t, s1, 0)
				_ = p1.page.Send(context.Background(), "go")
				p1.until("tool.delegated", isType(engine.EventToolDelegated))
				recv(t, started, "the helper's model turn")
				stop(t, e1)

				s2 := r.resumed(w, both, s1.ID())
				p2 := attach(t, s2, 0)
				got := p2.until("the reply", finalIdle("saw: "))
				var fin struct {
					OK     bool
					Code   string
					Result string
					Parent string
				}
				for _, ev := range got {
					var f struct {
						ID     string
						Parent string
					}
					_ = json.Unmarshal(ev.Frame, &f)
					if ev.Type == engine.EventToolFinished && f.ID == "call_1" && f.Parent == "" {
						_ = json.Unmarshal(ev.Frame, &fin)
					}
				}
				if (tt.want == "done" && (!fin.OK || fin.Result != "done")) || (tt.want != "done" && fin.Code != tt.want) {
					t.Errorf("research finished %+v, want %s", fin, tt.want)
				}
				checkJournal(t, r.store, s1.ID())
				tr, err := s2.Transcript(context.Background())
				if err != nil || len(tr) != 4 {
					t.Errorf("the resumed transcript (%v): %+v, want the session's 4 messages", err, tr)
				}
			})
		})
	}
}

// TestCloseDrainsSubagent: Close with Drain lets a running sub-agent finish,
// as it lets a worker attempt finish: the call it answers keeps its result.
func TestCloseDrainsSubagent(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		root := callsThenSummary(use("call_1", "research", `{}`))
		helper := callsThenSummary(use("w1", "get_weather", `{"city":"A"}`))
		both := helperAndRoot(helper, root)
		started, release := make(chan struct{}, 1), make(chan struct{})
		w := delegating(engine.AgentTool{Name: "research"})
		delegate := w.execute
		w.execute = func(ctx context.Context, ex engine.ToolExecute, p engine.Decision) (engine.Decision, error) {
			if ex.Name == "get_weather" { // the sub-agent's call waits for the test
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return engine.Decision{}, ctx.Err()
				}
			}
			return delegate(ctx, ex, p)
		}
		r.drain = time.Minute
		e1 := r.start(w, both)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0)
		_ = p1.page.Send(context.Background(), "go")
		recv(t, started, "the sub-agent's get_weather")

		closed := r.closeDraining(t, e1)
		close(release)
		if err := recv(t, closed, "Close"); err != nil {
			t.Fatal(err)
		}
		r.drain = 0
		s2 := r.loaded(w, both, s1.ID())
		got := attach(t, s2, 0).until("the reply", finalIdle("saw: "))
		var fin struct {
			ID, Parent, Result string
			OK                 bool
		}
		for _, ev := range got {
			var f struct {
				ID, Parent, Result string
				OK                 bool
			}
			_ = json.Unmarshal(ev.Frame, &f)
			if ev.Type == engine.EventToolFinished && f.ID == "call_1" && f.Parent == "" {
				fin = f
			}
		}
		if !fin.OK || fin.Result != "saw: sunny in A" {
			t.Errorf("research finished %+v, want the sub-agent's answer, kept through Close", fin)
		}
		checkJournal(t, r.store, s1.ID())
	})
}

// TestSubagentDecideEndsSession: Session.End called from inside the Decide
// of a sub-agent's trigger only asks, as from the session's own: the
// session ends once Decide returns, and nothing waits for itself.
func TestSubagentDecideEndsSession(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper := callsThenSummary()
	w := delegating(engine.AgentTool{Name: "research"})
	var session atomic.Pointer[engine.Session]
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.UserMessage); ok && req.Parent != nil {
			session.Load().End(ctx, "the helper's worker ended it")
			return engine.Decision{}, nil
		}
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &w.agent}, nil
		}
		return req.Proposed, nil
	}
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	session.Store(h.s)
	h.send("go")
	ended := h.waitType(engine.EventSessionEnded)
	if ended.Reason != "the helper's worker ended it" {
		t.Errorf("session.ended %s", ended.Raw)
	}
	recv(t, h.s.Done(), "the session's end")
}

// TestSubagentWorkerProgress: a worker attempt of a sub-agent reports
// progress as any attempt does, and ReportProgress returns once the report
// is stored (the reply comes from the session's own commit).
func TestSubagentWorkerProgress(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{"cities":["A"]}`))
	helper := callsThenSummary(use("call_1", "get_weather", `{"city":"A"}`))
	reported := make(chan error, 1)
	w := delegating(engine.AgentTool{Name: "research"})
	delegate := w.execute
	w.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
		if t.Name == "get_weather" {
			rctx, cancel := context.WithTimeout(ctx, hangGuard)
			reported <- engine.ReportProgress(rctx, 1, 2, "asking the weather service")
			cancel()
		}
		return delegate(ctx, t, proposed)
	}
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	h.send("research the weather in A")
	if err := recv(t, reported, "the sub-agent's progress report"); err != nil {
		t.Fatalf("ReportProgress from a sub-agent's attempt: %v", err)
	}
	progress := h.waitType(engine.EventToolProgress)
	if parentOf(progress) != "call_1" || !strings.Contains(string(progress.Raw), `"message":"asking the weather service"`) {
		t.Errorf("tool.progress %s, want the helper's, under call_1", progress.Raw)
	}
	if fin := h.waitFor("research's tool.finished", func(f frame) bool {
		return f.Type == engine.EventToolFinished && f.ID == "call_1" && parentOf(f) == ""
	}); !fin.OK {
		t.Errorf("research finished %s", fin.Raw)
	}
}

// TestSubagentClientCallAcrossRestart: a sub-agent's client call that a
// restart cut (the sub-agent is not in the state) settles once, cancelled,
// and an answer to it is told its attempt is over (stale_attempt: no answer
// settled it); a sub-agent after the restart
// that names its call as a call the session settled before it (the
// scripted model numbers from call_1) gets a new id, so an answer naming
// the settled call is refused, not taken as the new call's.
func TestSubagentClientCallAcrossRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		root := callsThenSummary(use("call_1", "research", `{}`))
		helper := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
			if last := req.Messages[len(req.Messages)-1]; last.Role == model.RoleTool {
				return model.Response{Text: "it is " + last.Content, StopReason: model.StopEndTurn}, nil
			}
			return model.Response{ToolUses: []model.ToolUse{use("call_1", "get_local_time", `{}`)}, StopReason: model.StopToolUse}, nil
		}}
		both := helperAndRoot(helper, root)
		w := delegating(engine.AgentTool{Name: "research"})
		ctx := context.Background()
		helperCall := func(p *reader, what string) string {
			t.Helper()
			calls := p.until(what, isType(engine.FrameToolCall))
			var f struct{ ID string }
			_ = json.Unmarshal(calls[len(calls)-1].Frame, &f)
			if f.ID == "" || f.ID == "call_1" {
				t.Fatalf("%s is %q, an id the session used", what, f.ID)
			}
			return f.ID
		}
		e1 := r.start(w, both)
		s1, err := e1.Open(ctx, engine.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p1 := attach(t, s1, 0, "get_local_time")
		// A whole research first: call_1 settles before the restart.
		_ = p1.page.Send(ctx, "go")
		first := helperCall(p1, "the first helper's tool.call")
		if err := p1.page.Answer(ctx, engine.ToolResult{ID: first, Attempt: 1, Result: json.RawMessage(`{"time":"08:00"}`)}); err != nil {
			t.Fatal(err)
		}
		p1.until("the first reply", finalIdle("saw: "))
		// A second, cut by the restart while its helper's call waits.
		_ = p1.page.Send(ctx, "again")
		cut := helperCall(p1, "the second helper's tool.call")
		stop(t, e1)

		s2 := r.resumed(w, both, s1.ID())
		p2 := attach(t, s2, 0, "get_local_time")
		// Replayed from the start, then what the load did: the cut call
		// settles, then its research (not idempotent: interrupted).
		got := p2.until("the interrupted research", func(ev engine.Event) bool {
			return ev.Type == engine.EventToolFinished && strings.Contains(string(ev.Frame), `"code":"interrupted"`)
		})
		finished := 0
		for _, ev := range got {
			var f struct {
				ID, Code, Parent string
			}
			_ = json.Unmarshal(ev.Frame, &f)
			if ev.Type == engine.EventToolFinished && f.ID == cut {
				finished++
				if f.Code != string(engine.CodeCancelled) || f.Parent == "" {
					t.Errorf("the cut call finished %s, want cancelled under its research call", ev.Frame)
				}
			}
		}
		if finished != 1 {
			t.Errorf("the cut call finished %d times, want once", finished)
		}
		// No answer settled the cut call: its attempt is over. The first
		// helper's call was settled by the page's answer: a repeat is told so.
		if err := p2.page.Answer(ctx, engine.ToolResult{ID: cut, Attempt: 1, Result: json.RawMessage(`{"time":"09:00"}`)}); !errors.Is(err, engine.ErrStaleAttempt) {
			t.Errorf("an answer to the cut call: %v, want ErrStaleAttempt", err)
		}
		if err := p2.page.Answer(ctx, engine.ToolResult{ID: first, Attempt: 1, Result: json.RawMessage(`{"time":"08:00"}`)}); !errors.Is(err, engine.ErrSettled) {
			t.Errorf("the first call's answer again: %v, want ErrSettled", err)
		}

		// A third research: its helper names its call call_1 again, the id
		// of the first research, settled before the restart.
		_ = p2.page.Send(ctx, "third")
		fresh := helperCall(p2, "the third helper's tool.call")
		if err := p2.page.Answer(ctx, engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`{"time":"late"}`)}); err == nil {
			t.Errorf("an answer naming the settled call_1 was taken")
		}
		if err := p2.page.Answer(ctx, engine.ToolResult{ID: fresh, Attempt: 1, Result: json.RawMessage(`{"time":"10:00"}`)}); err != nil {
			t.Fatalf("the page's answer to the new call: %v", err)
		}
		reply := p2.until("the third reply", finalIdle("saw: "))
		var frames []string
		for _, ev := range reply {
			frames = append(frames, string(ev.Frame))
		}
		if all := strings.Join(frames, "\n"); !strings.Contains(all, "10:00") || strings.Contains(all, "late") {
			t.Errorf("the third turn's events:\n%s\nwant the page's answer to the new call, and not the refused one", all)
		}
		checkJournal(t, r.store, s1.ID())
	})
}

// TestSubagentIDsDoNotTakeTheSessions: the session's model numbers its
// calls from its own transcript, as a sub-agent's does, and both share the
// session's ids: the session's call_2, after a sub-agent used call_2, runs
// under a fresh id instead of being refused as a duplicate (which left its
// tool use unanswered).
func TestSubagentIDsDoNotTakeTheSessions(t *testing.T) {
	var turns atomic.Int32
	root := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == model.RoleTool {
			return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
		}
		n := turns.Add(1)
		return model.Response{ToolUses: []model.ToolUse{use("call_"+string(rune('0'+n)), "research", `{"cities":["A"]}`)}, StopReason: model.StopToolUse}, nil
	}}
	helper := callsThenSummary(use("call_1", "get_weather", `{"city":"A"}`), use("call_2", "get_weather", `{"city":"B"}`))
	w := delegating(engine.AgentTool{Name: "research"})
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	for range 2 {
		h.send("research")
		h.waitFor("research's tool.finished", func(f frame) bool {
			return f.Type == engine.EventToolFinished && f.Name == "research" && parentOf(f) == ""
		})
		h.waitIdle()
	}
	ids := map[string]int{}
	for _, f := range h.seen {
		switch {
		case f.Type == engine.EventError:
			t.Errorf("error event %s", f.Raw)
		case f.Type == engine.EventToolFinished:
			ids[f.ID]++
			if !f.OK {
				t.Errorf("a call failed: %s", f.Raw)
			}
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("call %s settled %d times", id, n)
		}
	}
	if len(ids) != 6 {
		t.Errorf("%d calls settled, want 6 (research and two get_weather, twice): %v", len(ids), ids)
	}
	tr := h.transcript()
	answered := map[string]bool{}
	for _, m := range tr {
		if m.Role == model.RoleTool {
			answered[m.ToolUseID] = true
		}
	}
	for _, m := range tr {
		for _, u := range m.ToolUses {
			if !answered[u.ID] {
				t.Errorf("tool use %s (%s) is not answered", u.ID, u.Name)
			}
		}
	}
}

// TestSubagentApprovalAcrossRestart: a sub-agent's call that waits for the
// user's approval when the gateway restarts (the sub-agent is not in the
// state; its call has no tool.started yet) settles once, cancelled, as a
// cut call that started does; an approval after it is refused.
func TestSubagentApprovalAcrossRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		root := callsThenSummary(use("call_1", "research", `{}`))
		helper := callsThenSummary(use("call_1", "get_weather", `{"city":"A"}`))
		both := helperAndRoot(helper, root)
		careful := helperAgent
		careful.Tools = []engine.AgentTool{{Name: "get_weather", Input: engine.Schema(weatherInput), Approval: "always"}}
		w := delegating(engine.AgentTool{Name: "research"})
		execute := w.execute
		w.execute = func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error) {
			if t.Name == "research" {
				return engine.Decision{Actions: []engine.Action{engine.ToolDelegate{Agent: careful}}}, nil
			}
			return execute(ctx, t, proposed)
		}
		ctx := context.Background()
		e1 := r.start(w, both)
		s1, err := e1.Open(ctx, engine.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p1 := attach(t, s1, 0)
		_ = p1.page.Send(ctx, "go")
		asked := p1.until("the helper's tool.approval", isType(engine.EventToolApproval))
		var approval struct{ ID, Digest, Parent string }
		_ = json.Unmarshal(asked[len(asked)-1].Frame, &approval)
		if approval.Parent == "" {
			t.Fatalf("the approval %s is not the helper's", asked[len(asked)-1].Frame)
		}
		stop(t, e1)

		s2 := r.resumed(w, both, s1.ID())
		p2 := attach(t, s2, 0)
		got := p2.until("the interrupted research", func(ev engine.Event) bool {
			return ev.Type == engine.EventToolFinished && strings.Contains(string(ev.Frame), `"code":"interrupted"`)
		})
		finished := 0
		for _, ev := range got {
			var f struct{ ID, Code, Parent string }
			_ = json.Unmarshal(ev.Frame, &f)
			if ev.Type == engine.EventToolFinished && f.ID == approval.ID && f.Parent == approval.Parent {
				finished++
				if f.Code != string(engine.CodeCancelled) {
					t.Errorf("the call that waited for approval finished %s, want cancelled", ev.Frame)
				}
			}
		}
		if finished != 1 {
			t.Errorf("the call that waited for approval finished %d times, want once", finished)
		}
		if err := p2.page.Approve(ctx, engine.ToolApprove{ID: approval.ID, Digest: approval.Digest, Approved: true}); err == nil || errors.Is(err, engine.ErrUnknownCall) {
			t.Errorf("an approval of the cancelled call: %v, want it refused as settled", err)
		}
		checkJournal(t, r.store, s1.ID())
	})
}
