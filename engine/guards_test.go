package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// loopingModel calls a worker tool on every turn, as a model stuck in a loop
// does: with new arguments each time (distinct), or the same ones. Each turn
// reports tokens used.
func loopingModel(distinct bool, tokens int) *fakeModel {
	var n atomic.Int64
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		i := n.Add(1)
		args := `{"page": 1}`
		if distinct {
			args = fmt.Sprintf(`{"page": %d}`, i)
		}
		return model.Response{
			Text:       "Searching.",
			ToolUses:   []model.ToolUse{{ID: fmt.Sprintf("call_%d", i), Name: "search", Arguments: args}},
			StopReason: model.StopToolUse,
			Usage:      model.Usage{InputTokens: tokens - 10, OutputTokens: 10},
		}, nil
	}}
}

// answersAtOnce is a tool.execute that returns a result at once.
func answersAtOnce(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
	return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"nothing yet"`)}}}, nil
}

// guardFrame decodes a guard.tripped event.
func guardFrame(t tb, f frame) engine.GuardTripped {
	t.Helper()
	var g engine.GuardTripped
	if err := json.Unmarshal(f.Raw, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGuards: each limit stops a looping agent where it should: the model
// is not prompted again, the page sees guard.tripped naming the guard and the
// figure, the worker gets the trigger, the session goes idle, and the
// transcript stays one a provider accepts.
func TestGuards(t *testing.T) {
	tests := []struct {
		name     string
		distinct bool
		tokens   int
		limits   engine.Limits
		guard    string
		limit    int
		turns    int // model turns run
		runs     int // tool calls run
		inWords  string
	}{
		{"model turns, the default", true, 1, engine.Limits{}, engine.GuardModelTurns, 25, 25, 25, "25 turns"},
		{"model turns, set", true, 1, engine.Limits{MaxModelTurns: 4}, engine.GuardModelTurns, 4, 4, 4, "4 turns"},
		{"the same call, the default", false, 1, engine.Limits{}, engine.GuardRepeats, 3, 3, 2, "search with the same arguments 3 times"},
		{"message tokens", true, 1000, engine.Limits{MaxMessageTokens: 2500}, engine.GuardMessageTokens, 2500, 3, 3, "3,000 tokens, over its budget of 2,500"},
		{"session tokens", true, 1000, engine.Limits{MaxSessionTokens: 1500}, engine.GuardSessionTokens, 1500, 2, 2, "2,000 tokens, over its budget of 1,500"},
		{"message tokens, the budget reached", true, 1000, engine.Limits{MaxMessageTokens: 3000}, engine.GuardMessageTokens, 3000, 3, 3, "used 3,000 tokens, its budget."},
		{"session tokens, the budget reached", true, 1000, engine.Limits{MaxSessionTokens: 2000}, engine.GuardSessionTokens, 2000, 2, 2, "used 2,000 tokens, its budget."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int64
			limits := tt.limits
			w := &testWorker{
				agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "search"}}, Limits: &limits},
				execute: func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					runs.Add(1)
					return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"nothing yet"`)}}}, nil
				},
			}
			m := loopingModel(tt.distinct, tt.tokens)
			h := setup(t, w, m, engine.Options{})
			h.send("find it")
			g := guardFrame(t, h.waitType(engine.EventGuardTripped))
			h.waitIdle()
			if g.Guard != tt.guard || g.Limit != tt.limit || !strings.Contains(g.Message, tt.inWords) {
				t.Errorf("guard.tripped %+v, want guard %s, limit %d, a message with %q", g, tt.guard, tt.limit, tt.inWords)
			}
			if got := len(m.requests()); got != tt.turns {
				t.Errorf("%d model turns, want %d", got, tt.turns)
			}
			if got := runs.Load(); got != int64(tt.runs) {
				t.Errorf("the tool ran %d times, want %d", got, tt.runs)
			}
			if got := w.requests(engine.TypeGuardTripped); len(got) != 1 || got[0].Trigger.(engine.GuardTripped).Guard != tt.guard {
				t.Errorf("the worker got %d guard.tripped triggers, want 1 for %s", len(got), tt.guard)
			}
			checkTranscript(t, h.transcript())
			// The turn's messages, then the guard: a page draws the
			// guard's line after the text it stopped.
			tripped := false
			for _, f := range h.seen {
				tripped = tripped || f.Type == engine.EventGuardTripped
				if tripped && f.Type == engine.EventMessage {
					t.Fatalf("a message after guard.tripped: %s", h.types())
				}
			}
		})
	}
}

// checkTranscript: every tool use is answered by one tool message, right
// after its assistant message.
func checkTranscript(t tb, msgs []model.Message) {
	t.Helper()
	for i, m := range msgs {
		for j, u := range m.ToolUses {
			k := i + 1 + j
			if k >= len(msgs) || msgs[k].Role != model.RoleTool || msgs[k].ToolUseID != u.ID {
				t.Fatalf("tool use %s (message %d) is not answered in place", u.ID, i)
			}
		}
	}
}

// TestGuardCountsPerMessage: the turn and repeat counts start again with
// each user message; the session's tokens do not.
func TestGuardCountsPerMessage(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "search"}}, Limits: &engine.Limits{MaxModelTurns: 3, MaxSessionTokens: 500}}, execute: answersAtOnce}
	m := loopingModel(true, 100)
	h := setup(t, w, m, engine.Options{})
	h.send("find it")
	if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardModelTurns {
		t.Fatalf("first message: %+v, want model_turns", g)
	}
	h.waitIdle()
	h.send("again")
	if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardSessionTokens || g.Value != 500 {
		t.Fatalf("second message: %+v, want session_tokens at 500", g)
	}
	h.waitIdle()
	if got := len(m.requests()); got != 5 {
		t.Errorf("%d model turns, want 3 then 2", got)
	}
}

// TestNoMessageAfterTheSessionBudget: a session whose token budget is used
// up refuses the next user message with ErrLimitExceeded, saying so, and
// stores nothing of it: the model would answer none, and a client could
// grow the journal without end. A worker that raises the budget when the
// guard trips keeps the session taking messages.
func TestNoMessageAfterTheSessionBudget(t *testing.T) {
	for _, raises := range []bool{false, true} {
		t.Run(fmt.Sprintf("the worker raises the budget: %v", raises), func(t *testing.T) {
			agent := engine.AgentConfig{Model: "fake-model", Tools: []engine.AgentTool{{Name: "search"}}, Limits: &engine.Limits{MaxModelTurns: 10, MaxSessionTokens: 300}}
			w := budgetWorker(agent, raises, engine.Limits{MaxModelTurns: 2, MaxSessionTokens: 1000})
			w.execute = answersAtOnce
			h := setup(t, w, loopingModel(true, 100), engine.Options{})
			if err := h.page.SendOnce(context.Background(), "m1", "find it"); err != nil {
				t.Fatal(err)
			}
			if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardSessionTokens {
				t.Fatalf("guard.tripped %+v, want session_tokens", g)
			}
			h.waitIdle()
			before := len(h.transcript())
			err := h.s.Send(context.Background(), "and again")
			switch {
			case raises && err != nil:
				t.Fatalf("Send after the worker raised the budget: %v", err)
			case raises:
				if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardModelTurns {
					t.Errorf("after the raise, guard.tripped %+v, want model_turns", g)
				}
			case !errors.Is(err, engine.ErrBudgetSpent) || !errors.Is(err, engine.ErrLimitExceeded) || !strings.Contains(err.Error(), "used 300 tokens, its budget"):
				t.Fatalf("Send after the budget: %v, want ErrBudgetSpent (an ErrLimitExceeded) naming the budget", err)
			default:
				if got := len(h.transcript()); got != before {
					t.Errorf("the transcript grew from %d to %d messages with a refused one", before, got)
				}
				// A copy of the message that used the budget up, sent
				// again after a lost socket, is the session's: taken, not
				// refused.
				if err := h.page.SendOnce(context.Background(), "m1", "find it"); err != nil {
					t.Errorf("a copy of the message taken before the budget ran out: %v, want it confirmed", err)
				}
			}
		})
	}
}

// TestWorkerOverridesAGuard: the worker decides otherwise. Answering
// guard.tripped with model.prompt runs one turn past the guard, after which
// it trips again; raising the limits with a new agent config lets the loop
// go on to the new limit.
func TestWorkerOverridesAGuard(t *testing.T) {
	var trips atomic.Int64
	agent := engine.AgentConfig{Model: "fake-model", Tools: []engine.AgentTool{{Name: "search"}}, Limits: &engine.Limits{MaxModelTurns: 2}}
	w := &testWorker{agent: agent, execute: answersAtOnce}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			return engine.Decision{Agent: &agent}, nil
		case engine.GuardTripped:
		default:
			return req.Proposed, nil
		}
		switch trips.Add(1) {
		case 1: // one more turn
			return engine.Decision{Actions: []engine.Action{engine.ModelPrompt{}}}, nil
		case 2: // a higher limit
			raised := agent
			raised.Limits = &engine.Limits{MaxModelTurns: 5}
			return engine.Decision{Agent: &raised, Actions: []engine.Action{engine.ModelPrompt{}}}, nil
		}
		return req.Proposed, nil
	}
	m := loopingModel(true, 1)
	h := setup(t, w, m, engine.Options{})
	h.send("find it")
	var said []string
	for range 3 {
		said = append(said, guardFrame(t, h.waitType(engine.EventGuardTripped)).Message)
	}
	h.waitIdle()
	want := []string{
		"Stopped: the model took 2 turns to answer one message, the limit.",
		"Stopped: the model took 3 turns to answer one message, over the limit of 2.", // the granted turn
		"Stopped: the model took 5 turns to answer one message, the limit.",
	}
	if !slices.Equal(said, want) {
		t.Errorf("the guards said %q, want %q", said, want)
	}
	// 2 turns, one granted (3), then up to the raised 5.
	if got := len(m.requests()); got != 5 {
		t.Errorf("%d model turns, want 5", got)
	}
	if got := trips.Load(); got != 3 {
		t.Errorf("%d guard.tripped triggers, want 3", got)
	}
}

// TestEngineLimitsDefaults: Options.Limits sets the defaults an agent's
// config leaves 0; a negative limit is none.
func TestEngineLimitsDefaults(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "search"}}, Limits: &engine.Limits{MaxRepeats: -1}}, execute: answersAtOnce}
	m := loopingModel(false, 1)
	h := setup(t, w, m, engine.Options{Limits: engine.Limits{MaxModelTurns: 6}})
	h.send("find it")
	if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardModelTurns || g.Limit != 6 {
		t.Errorf("guard.tripped %+v, want model_turns at the engine's 6 (repeats off)", g)
	}
}

// TestBadLimitsRefused: a limit below -1 is a bad agent config that names
// the member.
func TestBadLimitsRefused(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Model: "fake-model", Limits: &engine.Limits{MaxRepeats: -3}}}
	e, err := engine.New(engine.Options{Worker: w, Logger: quiet(), Retain: -1,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return loopingModel(true, 1), nil })})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Close(context.Background()) }()
	_, err = e.Open(context.Background(), engine.OpenOptions{})
	if !errors.Is(err, engine.ErrBadConfig) || !strings.Contains(err.Error(), "limits.maxRepeats is -3") {
		t.Errorf("Open = %v, want ErrBadConfig naming limits.maxRepeats", err)
	}
}

// TestBudgetSpentByAReplyTripsAtOnce: a reply whose turn uses the session's
// token budget up trips session_tokens as the turn ends, not at the next
// message (which the session refuses): the page learns it at once, and the
// worker gets the guard, and may raise the budget, the one way the session
// takes messages again. It trips once for the budget it spent.
func TestBudgetSpentByAReplyTripsAtOnce(t *testing.T) {
	for _, raises := range []bool{false, true} {
		t.Run(fmt.Sprintf("the worker raises the budget: %v", raises), func(t *testing.T) {
			w := budgetWorker(engine.AgentConfig{Model: "fake-model", Limits: &engine.Limits{MaxSessionTokens: 300}}, raises, engine.Limits{MaxSessionTokens: 1000})
			m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
				return model.Response{Text: "done", StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 290, OutputTokens: 10}}, nil
			}}
			h := setup(t, w, m, engine.Options{})
			h.send("hi")
			if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardSessionTokens || g.Value != 300 {
				t.Fatalf("guard.tripped %+v, want session_tokens at 300", g)
			}
			h.waitIdle()
			if n := h.count(engine.EventGuardTripped, ""); n != 1 {
				t.Errorf("%d guard.tripped, want 1", n)
			}
			err := h.s.Send(context.Background(), "more")
			switch {
			case raises && err != nil:
				t.Fatalf("Send after the worker raised the budget: %v", err)
			case !raises && !errors.Is(err, engine.ErrLimitExceeded):
				t.Fatalf("Send after the budget: %v, want ErrLimitExceeded", err)
			}
		})
	}
}

// budgetWorker runs agent, and when a guard trips gives it the limits
// raised instead, if raises.
func budgetWorker(agent engine.AgentConfig, raises bool, raised engine.Limits) *testWorker {
	w := &testWorker{agent: agent}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			return engine.Decision{Agent: &agent}, nil
		case engine.GuardTripped:
			if raises {
				more := agent
				more.Limits = &raised
				return engine.Decision{Agent: &more}, nil
			}
		}
		return req.Proposed, nil
	}
	return w
}

// TestWaitingMessagesCountedWhole: the messages waiting for a running turn
// are bounded in number, and their ids count in their bytes: each rides in
// every step's state, so one-byte messages with long ids had no bound but
// their contents', and a page could make every step store megabytes. The
// bound holds for messages that come together: each is checked in the
// step that adds it.
func TestWaitingMessagesCountedWhole(t *testing.T) {
	hold := func(t *testing.T, opts engine.Options) *harness {
		started := make(chan struct{}, 1)
		m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done() // held until the session closes
			return model.Response{}, ctx.Err()
		}}
		h := setup(t, &testWorker{}, m, opts)
		h.send("hold")
		recv(t, started, "the held turn")
		return h
	}
	ctx := context.Background()
	refused := func(t *testing.T, err error, says string) {
		t.Helper()
		if !errors.Is(err, engine.ErrLimitExceeded) || !strings.Contains(err.Error(), says) {
			t.Errorf("a message past the waiting messages' bound: %v, want ErrLimitExceeded saying %q", err, says)
		}
	}
	t.Run("count", func(t *testing.T) {
		h := hold(t, engine.Options{})
		for i := range 64 {
			if err := h.page.SendOnce(ctx, fmt.Sprint("m", i), "x"); err != nil {
				t.Fatalf("waiting message %d: %v", i, err)
			}
		}
		refused(t, h.page.SendOnce(ctx, "m64", "x"), "64 messages wait for the running turn")
	})
	t.Run("ids", func(t *testing.T) {
		h := hold(t, engine.Options{MaxMessageBytes: 100})
		if err := h.page.SendOnce(ctx, strings.Repeat("i", 60), strings.Repeat("a", 10)); err != nil {
			t.Fatal(err)
		}
		refused(t, h.page.SendOnce(ctx, strings.Repeat("j", 30), strings.Repeat("b", 10)), "hold 70 bytes")
	})
	t.Run("together", func(t *testing.T) {
		h := hold(t, engine.Options{MaxMessageBytes: 100})
		var taken atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if h.s.Send(ctx, strings.Repeat("a", 60)) == nil {
					taken.Add(1)
				}
			})
		}
		wg.Wait()
		if n := taken.Load(); n != 1 {
			t.Errorf("%d messages of 60 bytes wait, with at most 100 bytes waiting", n)
		}
	})
}

// TestMessagesWaitingForATurnAreBounded: the user messages that wait for a
// running turn may hold at most MaxMessageBytes together (they ride in
// every step's state, which must fit the store's message); past it a
// message is refused with ErrLimitExceeded, and once the turn ends they
// are taken again.
func TestMessagesWaitingForATurnAreBounded(t *testing.T) {
	started, finish := make(chan struct{}, 10), make(chan struct{})
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		started <- struct{}{}
		if last := req.Messages[len(req.Messages)-1]; last.Content == "hold" {
			<-finish
		}
		return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
	}}
	h := setup(t, &testWorker{}, m, engine.Options{MaxMessageBytes: 100})
	h.send("hold")
	recv(t, started, "the held turn")
	ctx := context.Background()
	for i, content := range []string{strings.Repeat("a", 60), strings.Repeat("b", 40)} {
		if err := h.s.Send(ctx, content); err != nil {
			t.Fatalf("waiting message %d: %v", i, err)
		}
	}
	h.transcript() // a barrier: the two wait
	if err := h.s.Send(ctx, "c"); !errors.Is(err, engine.ErrLimitExceeded) || !strings.Contains(err.Error(), "waiting for the running turn") {
		t.Errorf("a message past the waiting messages' bound: %v, want ErrLimitExceeded saying why", err)
	}
	close(finish)
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(time.Millisecond) {
		tr := h.transcript()
		if len(tr) >= 6 && tr[len(tr)-1].Role == model.RoleAssistant {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting messages were not answered: %+v", tr)
		}
	}
	if err := h.s.Send(ctx, strings.Repeat("d", 100)); err != nil {
		t.Errorf("a message once none waits: %v", err)
	}
}

// TestNegativeUsageCountsNothing: a server that reports a negative token
// count lowers no budget's sum: it counts as none, the page reads none.
func TestNegativeUsageCountsNothing(t *testing.T) {
	w := budgetWorker(engine.AgentConfig{Model: "fake-model", Limits: &engine.Limits{MaxSessionTokens: 300}}, false, engine.Limits{})
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Text: "done", StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: -1_000_000, OutputTokens: 400}}, nil
	}}
	h := setup(t, w, m, engine.Options{})
	h.send("hi")
	var finished engine.ModelFinishedEvent
	if err := json.Unmarshal(h.waitType(engine.EventModelFinished).Raw, &finished); err != nil {
		t.Fatal(err)
	}
	if finished.Usage != (engine.Usage{OutputTokens: 400}) {
		t.Errorf("model.finished usage %+v, want 0 in, 400 out", finished.Usage)
	}
	if g := guardFrame(t, h.waitType(engine.EventGuardTripped)); g.Guard != engine.GuardSessionTokens {
		t.Errorf("guard.tripped %+v, want session_tokens: 400 tokens used a budget of 300", g)
	}
}

// TestBudgetTripsOnceForMessagesAlreadyTaken: messages taken while a turn
// ran (they wait for it) are the session's once taken, even when the turns
// before them use its budget up: each joins the transcript, unanswered,
// and the budget's guard.tripped comes once (agent.md), not once a message
// (an outside audit: 32 for one chat).
func TestBudgetTripsOnceForMessagesAlreadyTaken(t *testing.T) {
	w := budgetWorker(engine.AgentConfig{Model: "fake-model", Limits: &engine.Limits{MaxSessionTokens: 300}}, false, engine.Limits{})
	first := make(chan struct{})
	var turns atomic.Int32
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		if turns.Add(1) == 1 {
			select {
			case <-first:
			case <-ctx.Done():
				return model.Response{}, ctx.Err()
			}
		}
		return model.Response{Text: "done", StopReason: model.StopEndTurn, Usage: model.Usage{InputTokens: 90, OutputTokens: 10}}, nil
	}}
	h := setup(t, w, m, engine.Options{})
	h.send("m0")
	waitUntil(t, "the first turn", func() bool { return turns.Load() == 1 })
	for i := 1; i <= 5; i++ {
		if err := h.page.SendOnce(context.Background(), fmt.Sprint("m", i), fmt.Sprint("m", i)); err != nil {
			t.Fatalf("message %d, taken while the first turn runs: %v", i, err)
		}
	}
	close(first)
	h.waitFor("the last message", func(f frame) bool { return f.Type == engine.EventMessage && f.msg(t).Content == "m5" })
	h.waitIdle()
	if n := h.count(engine.EventGuardTripped, ""); n != 1 {
		t.Errorf("%d guard.tripped, want 1 for the budget", n)
	}
	users := 0
	for _, msg := range h.transcript() {
		if msg.Role == model.RoleUser {
			users++
		}
	}
	if users != 6 {
		t.Errorf("%d user messages in the transcript, want the 6 taken", users)
	}
	if n := turns.Load(); n != 3 {
		t.Errorf("%d model turns, want 3: the budget (300) is used by three of 100", n)
	}
}
