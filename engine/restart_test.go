package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
)

// reader reads a page's frames on a goroutine of its own.
type reader struct {
	t      *testing.T
	page   *engine.Page
	frames chan engine.Event
}

func attach(t *testing.T, s *engine.Session, after int64, tools ...string) *reader {
	t.Helper()
	p, err := s.Attach(context.Background(), engine.AttachOptions{After: after, Tools: tools, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{t: t, page: p, frames: make(chan engine.Event, 10000)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range p.Frames(ctx) {
			r.frames <- ev
		}
	}()
	t.Cleanup(func() { cancel(); <-done; p.Detach() })
	return r
}

// until reads until ok holds, returning the frames read, that one last.
func (r *reader) until(what string, ok func(engine.Event) bool) []engine.Event {
	r.t.Helper()
	var out []engine.Event
	for {
		ev := recv(r.t, r.frames, what)
		out = append(out, ev)
		if ok(ev) {
			return out
		}
	}
}

func isType(typ string) func(engine.Event) bool {
	return func(ev engine.Event) bool { return ev.Type == typ }
}

// finalIdle is the session.idle after the model's last reply.
func finalIdle(reply string) func(engine.Event) bool {
	seenReply := false
	return func(ev engine.Event) bool {
		if ev.Type == engine.EventMessage && strings.Contains(string(ev.Frame), `"role":"assistant","content":"`+reply) {
			seenReply = true
		}
		return seenReply && ev.Type == engine.EventSessionIdle
	}
}

// checkJournal checks what every restart must keep: the stored seqs run
// 1..n with no gap or repeat, the transcript answers every tool use once,
// and each call settled once.
func checkJournal(t *testing.T, store engine.Store, id string) []engine.Event {
	t.Helper()
	all := stored(t, store, id)
	finished := map[string]int{}
	var transcript []model.Message
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d", i+1, ev.Seq)
		}
		var f struct {
			ID      string
			Message model.Message
			Parent  string // a sub-agent's event: its transcript is its own
		}
		_ = json.Unmarshal(ev.Frame, &f)
		switch ev.Type {
		case engine.EventToolFinished:
			finished[f.ID]++
		case engine.EventMessage:
			if f.Parent != "" {
				continue
			}
			transcript = append(transcript, f.Message)
		}
	}
	for id, n := range finished {
		if n != 1 {
			t.Errorf("call %s settled %d times", id, n)
		}
	}
	// A provider accepts the transcript: every tool use is answered by one
	// tool message, right after its assistant message.
	for i, m := range transcript {
		for j, u := range m.ToolUses {
			k := i + 1 + j
			if k >= len(transcript) || transcript[k].Role != model.RoleTool || transcript[k].ToolUseID != u.ID {
				t.Errorf("tool use %s (message %d) is not answered in place: %+v", u.ID, i, transcript)
			}
		}
	}
	return all
}

func count(events []engine.Event, typ string) int {
	n := 0
	for _, ev := range events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// callThenStop runs an engine on the rig until alice's page has the
// tool.call of the message "delete my draft", and stops it there: the call
// is open in the journal. It returns the session and the page's frames.
func (r *rig) callThenStop(w *testWorker, m model.Model) (*engine.Session, []engine.Event) {
	r.t.Helper()
	e := r.start(w, m)
	s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		r.t.Fatal(err)
	}
	p := attach(r.t, s, 0, "confirm")
	if err := p.page.Send(context.Background(), "delete my draft"); err != nil {
		r.t.Fatal(err)
	}
	frames := p.until("tool.call", isType(engine.FrameToolCall))
	stop(r.t, e)
	return s, frames
}

// TestRestartClientAttemptDeliveredAgain: a client attempt whose deadline
// has not passed is delivered again, same attempt and deadline, to the page
// that comes back after the restart; it settles once.
func TestRestartClientAttemptDeliveredAgain(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
		m := callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))
		s1, before := r.callThenStop(w, m)
		last := before[len(before)-2].Seq // the tool.started before it
		r.clock.Advance(10 * time.Second) // down for 10s of the 30s

		s2 := r.loaded(w, m, s1.ID())
		if s2.Owner() != "alice" {
			t.Errorf("owner after the restart: %q", s2.Owner())
		}
		// The page that held it went with the process: pages are told the
		// call waits for one, where the last word was tool.started naming
		// that page (an outside audit: "running in another tab" until the
		// deadline).
		events := stored(t, r.store, s1.ID())
		if ev := events[len(events)-1]; ev.Type != engine.EventToolLeased || strings.Contains(string(ev.Frame), `"page"`) || !strings.Contains(string(ev.Frame), `"id":"call_1"`) {
			t.Errorf("the journal's last event after the restart: %s, want tool.leased for call_1 naming no page", ev.Frame)
		}
		p2 := attach(t, s2, last, "confirm")
		again := p2.until("tool.call again", isType(engine.FrameToolCall))
		if got, want := string(again[len(again)-1].Frame), string(before[len(before)-1].Frame); got != want {
			t.Errorf("delivered after the restart:\n %s\nbefore:\n %s", got, want)
		}
		if err := p2.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`{"approved":true}`)}); err != nil {
			t.Fatal(err)
		}
		p2.until("the reply", finalIdle("saw: "))
		checkJournal(t, r.store, s1.ID())
	})
}

// TestRestartCallDurationFromItsStart: a call that settles after a restart
// counts its duration from its start before the restart, not from the
// zero time (292 years in the histogram after every deploy).
func TestRestartCallDurationFromItsStart(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
		m := callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))
		s1, before := r.callThenStop(w, m)
		r.clock.Advance(10 * time.Second)

		r.metrics = metrics.New()
		p2 := attach(t, r.loaded(w, m, s1.ID()), before[len(before)-2].Seq, "confirm")
		p2.until("tool.call again", isType(engine.FrameToolCall))
		r.clock.Advance(2 * time.Second)
		if err := p2.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`{"approved":true}`)}); err != nil {
			t.Fatal(err)
		}
		p2.until("the reply", finalIdle("saw: "))
		// From the call's start: 10 s down, 2 s more to the answer.
		if n, sum := histogram(t, r.metrics, "gateway_tool_call_duration_seconds"); n != 1 || sum != 12 {
			t.Errorf("the call's duration: %d observed, %gs in all; want 1, 12s", n, sum)
		}
	})
}

// histogram reads the one series of the histogram name: its count and sum.
func histogram(t *testing.T, m *metrics.Metrics, name string) (uint64, float64) {
	t.Helper()
	h := metricOf(t, m, name).GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// TestRestartExpiredClientAttemptTimesOut: an attempt whose deadline passed
// while the gateway was down times out when the session loads, and is
// retried under its policy.
func TestRestartExpiredClientAttemptTimesOut(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s", Backoff: "1s"})
		m := callsThenSummary(use("call_1", "confirm", `{}`))
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0, "confirm")
		_ = p1.page.Send(context.Background(), "go")
		p1.until("tool.call", isType(engine.FrameToolCall))
		stop(t, e1)
		seen := int64(len(stored(t, r.store, s1.ID())))
		r.clock.Advance(time.Minute) // past the deadline

		s2 := r.loaded(w, m, s1.ID())
		p2 := attach(t, s2, seen, "confirm")
		p2.until("tool.retrying", isType(engine.EventToolRetrying))
		r.clock.Advance(time.Second)
		got := p2.until("attempt 2", isType(engine.FrameToolCall))
		var c engine.ClientCall
		_ = json.Unmarshal(got[len(got)-1].Frame, &c)
		if c.Attempt != 2 {
			t.Fatalf("after the restart: %+v, want attempt 2", c)
		}
		_ = p2.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 2, Result: json.RawMessage(`"ok"`)})
		p2.until("the reply", finalIdle("saw: ok"))
		checkJournal(t, r.store, s1.ID())
	})
}

// TestRestartBackoffResumesOnTime: a backoff in progress at the restart
// starts the next attempt at its original time, not later.
func TestRestartBackoffResumesOnTime(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "10s", Backoff: "20s"})
		m := callsThenSummary(use("call_1", "confirm", `{}`))
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0, "confirm")
		_ = p1.page.Send(context.Background(), "go")
		p1.until("tool.call", isType(engine.FrameToolCall))
		r.clock.Advance(10 * time.Second) // attempt 1 times out; the backoff is 20s × jitter 0.5 = 10s
		p1.until("tool.retrying", isType(engine.EventToolRetrying))
		stop(t, e1)
		r.clock.Advance(4 * time.Second)

		s2 := r.resumed(w, m, s1.ID())
		p2 := attach(t, s2, s2.LastSeq(), "confirm")
		p2.until("session.opened", isType(engine.FrameSessionOpened))
		r.clock.Advance(5 * time.Second) // 9s of the 10s backoff
		if _, err := s2.Transcript(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-p2.frames:
			t.Fatalf("attempt 2 started before its time: %s", ev.Frame)
		default:
		}
		r.clock.Advance(time.Second)
		got := p2.until("attempt 2", isType(engine.FrameToolCall))
		var c engine.ClientCall
		_ = json.Unmarshal(got[len(got)-1].Frame, &c)
		if c.Attempt != 2 || c.Deadline != at(30*time.Second) {
			t.Errorf("attempt after the restart: %+v, want attempt 2 with deadline %s", c, at(30*time.Second))
		}
	})
}

// TestRestartWorkerAttempt: a worker attempt running at the restart runs
// again when its tool is idempotent, and otherwise settles as interrupted,
// and the model is told.
func TestRestartWorkerAttempt(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name       string
		idempotent *bool
		wantRuns   int
		wantTool   string
	}{
		{"idempotent", &yes, 2, "found"},
		{"not declared", nil, 1, "interrupted"},
		{"not idempotent", &no, 1, "interrupted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, r *rig) {
				var mu sync.Mutex
				runs := 0
				block := make(chan struct{})
				w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup", Idempotent: tt.idempotent}}}}
				w.execute = func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					mu.Lock()
					runs++
					n := runs
					mu.Unlock()
					if n == 1 { // the first run is cut by the restart
						select {
						case <-block:
						case <-ctx.Done():
						}
						return engine.Decision{}, ctx.Err()
					}
					return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
				}
				m := callsThenSummary(use("call_1", "lookup", `{}`))
				e1 := r.start(w, m)
				s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
				p1 := attach(t, s1, 0)
				_ = p1.page.Send(context.Background(), "go")
				p1.until("tool.started", isType(engine.EventToolStarted))
				stop(t, e1)

				s2 := r.resumed(w, m, s1.ID())
				p2 := attach(t, s2, 0)
				got := p2.until("the reply", finalIdle("saw: "))
				mu.Lock()
				if runs != tt.wantRuns {
					t.Errorf("the tool ran %d times, want %d", runs, tt.wantRuns)
				}
				mu.Unlock()
				var fin struct {
					OK     bool
					Code   string
					Result string
					Error  string
				}
				for _, ev := range got {
					if ev.Type == engine.EventToolFinished {
						_ = json.Unmarshal(ev.Frame, &fin)
					}
				}
				if tt.wantTool == "found" && (!fin.OK || fin.Result != "found") {
					t.Errorf("tool.finished %+v, want found", fin)
				}
				if tt.wantTool == "interrupted" && (fin.OK || fin.Code != string(engine.CodeInterrupted) || !strings.Contains(fin.Error, "whether it took effect is unknown")) {
					t.Errorf("tool.finished %+v, want interrupted", fin)
				}
				checkJournal(t, r.store, s1.ID())
			})
		})
	}
}

// TestCloseDrainsWorkerAttempts: with Drain, Close (a deploy's SIGTERM)
// lets a running worker attempt finish and keeps its result, so a tool that
// is not idempotent is not cut; when Drain runs out first, the attempt is
// cut and settles interrupted, as after a crash.
func TestCloseDrainsWorkerAttempts(t *testing.T) {
	for _, tt := range []struct {
		name     string
		finishes bool // the worker answers before Drain runs out
		wantTool string
	}{
		{"finishes in time", true, "found"},
		{"drain runs out", false, "interrupted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, r *rig) {
				var mu sync.Mutex
				runs := 0
				started, release := make(chan struct{}, 1), make(chan struct{})
				w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "send_email"}}}}
				w.execute = func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					mu.Lock()
					runs++
					mu.Unlock()
					started <- struct{}{}
					select {
					case <-release:
						return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"found"`)}}}, nil
					case <-ctx.Done():
						return engine.Decision{}, ctx.Err()
					}
				}
				m := callsThenSummary(use("call_1", "send_email", `{}`))
				r.drain = time.Minute
				e1 := r.start(w, m)
				s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
				p1 := attach(t, s1, 0)
				_ = p1.page.Send(context.Background(), "go")
				recv(t, started, "the worker attempt")

				closed := r.closeDraining(t, e1)
				select {
				case err := <-closed:
					t.Fatalf("Close returned (%v) while a worker attempt ran and Drain had not run out", err)
				default:
				}
				if tt.finishes {
					close(release)
				} else {
					r.clock.Advance(time.Minute)
				}
				if err := recv(t, closed, "Close"); err != nil {
					t.Fatal(err)
				}

				r.drain = 0
				s2 := r.loaded(w, m, s1.ID())
				got := attach(t, s2, 0).until("the reply", finalIdle("saw: "))
				mu.Lock()
				if runs != 1 {
					t.Errorf("the tool ran %d times, want 1", runs)
				}
				mu.Unlock()
				var fin struct {
					OK     bool
					Code   string
					Result string
				}
				for _, ev := range got {
					if ev.Type == engine.EventToolFinished {
						_ = json.Unmarshal(ev.Frame, &fin)
					}
				}
				switch {
				case tt.wantTool == "found" && (!fin.OK || fin.Result != "found"):
					t.Errorf("tool.finished %+v, want its result kept", fin)
				case tt.wantTool == "interrupted" && (fin.OK || fin.Code != string(engine.CodeInterrupted)):
					t.Errorf("tool.finished %+v, want interrupted", fin)
				}
				checkJournal(t, r.store, s1.ID())
			})
		})
	}
}

// TestRestartModelTurnCut: a model turn cut off mid-stream is discarded,
// with an event that tells pages to drop its partial reply, and run again.
// One cut before it streamed anything is run again with no such event:
// there is nothing to drop.
func TestRestartModelTurnCut(t *testing.T) {
	tests := []struct {
		name   string
		deltas []string
		want   string
	}{
		{"mid-stream", []string{"Hel", "lo, wo"},
			"session.opened session.idle message model.delta model.delta model.discarded model.delta model.finished message session.idle"},
		{"before any text", nil,
			"session.opened session.idle message model.delta model.finished message session.idle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, r *rig) {
				asked := make(chan struct{}, 1)
				cut := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
					for _, d := range tc.deltas {
						onDelta(d)
					}
					asked <- struct{}{}
					<-ctx.Done()
					return model.Response{}, ctx.Err()
				})
				whole := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
					onDelta("Hello, world.")
					return model.Response{Text: "Hello, world.", StopReason: model.StopEndTurn}, nil
				})
				w := &testWorker{}
				e1 := r.start(w, cut)
				s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
				p1 := attach(t, s1, 0)
				_ = p1.page.Send(context.Background(), "hi")
				<-asked
				if n := len(tc.deltas); n > 0 {
					p1.until("the last delta", func(ev engine.Event) bool { return strings.Contains(string(ev.Frame), tc.deltas[n-1]) })
				}
				stop(t, e1)

				e2 := r.start(w, whole)
				if err := e2.Resume(context.Background()); err != nil {
					t.Fatal(err)
				}
				s2, ok := e2.Session(s1.ID())
				if !ok {
					t.Fatal("Resume did not load the session whose turn was cut")
				}
				p2 := attach(t, s2, 0)
				got := p2.until("the reply", finalIdle("Hello, world."))
				var types []string
				for _, ev := range got {
					types = append(types, ev.Type)
				}
				if strings.Join(types, " ") != tc.want {
					t.Errorf("the page saw\n %s\nwant\n %s", strings.Join(types, " "), tc.want)
				}
				all := checkJournal(t, r.store, s1.ID())
				if want := strings.Count(tc.want, "model.discarded"); count(all, engine.EventModelDiscarded) != want {
					t.Errorf("%d model.discarded events, want %d", count(all, engine.EventModelDiscarded), want)
				}
				tr, _ := s2.Transcript(context.Background())
				if len(tr) != 2 || tr[1].Content != "Hello, world." {
					t.Errorf("transcript %+v", tr)
				}
			})
		})
	}
}

// TestRestartKeepsTheAgentItChangedTo: the agent a session's worker set on a
// later turn, and not the first, is the one the session has after a
// restart, however many steps came after the change (the journal writes the
// agent only in the step where it changed).
func TestRestartKeepsTheAgentItChangedTo(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{agent: engine.AgentConfig{System: "first"}}
		w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
			switch tr := req.Trigger.(type) {
			case engine.SessionStart:
				agent := w.agent
				return engine.Decision{Agent: &agent}, nil
			case engine.UserMessage:
				if tr.Message.Content == "switch" {
					return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model", System: "second"}, Actions: req.Proposed.Actions}, nil
				}
			}
			return req.Proposed, nil
		}
		var mu sync.Mutex
		var systems []string
		m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
			mu.Lock()
			systems = append(systems, req.System)
			mu.Unlock()
			return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
		}}
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0)
		for _, text := range []string{"hi", "switch", "one", "two"} {
			if err := p1.page.Send(context.Background(), text); err != nil {
				t.Fatal(err)
			}
			p1.until("the reply to "+text, finalIdle("done"))
		}
		stop(t, e1)

		s2 := r.loaded(w, m, s1.ID())
		p2 := attach(t, s2, s2.LastSeq())
		if err := p2.page.Send(context.Background(), "after"); err != nil {
			t.Fatal(err)
		}
		p2.until("the reply after the restart", finalIdle("done"))
		mu.Lock()
		defer mu.Unlock()
		if got := strings.Join(systems, " "); got != "first second second second second" {
			t.Errorf("the model's system prompts, turn by turn: %s; want the first, then the second, after the restart too", got)
		}
	})
}

// TestRestartEndedStaysEnded: a session that ended is not brought back.
func TestRestartEndedStaysEnded(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{}
		e1 := r.start(w, textModel())
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		s1.End(context.Background(), "bye")
		stop(t, e1)
		e2 := r.start(w, textModel())
		if err := e2.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := e2.Load(context.Background(), s1.ID()); !errors.Is(err, engine.ErrSessionClosed) {
			t.Errorf("Load of an ended session: %v, want ErrSessionClosed", err)
		}
		if _, err := e2.Load(context.Background(), "never"); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("Load of an unknown session: %v, want ErrNoSession", err)
		}
	})
}

// TestRestartLateAnswers: after a restart a late answer is told what it
// would have been told before: a repeat of the answer that settled its call
// gets ErrSettled, an answer to a call the gateway settled (its time ran
// out) ErrStaleAttempt, as the journal says which it was.
func TestRestartLateAnswers(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := confirmWorker(&engine.RetryPolicy{Attempts: 1, Timeout: "30s"})
		m := callsThenSummary(use("call_1", "confirm", `{}`))
		ctx := context.Background()
		e1 := r.start(w, m)
		s1, _ := e1.Open(ctx, engine.OpenOptions{})
		p1 := attach(t, s1, 0, "confirm")
		_ = p1.page.Send(ctx, "go")
		p1.until("tool.call", isType(engine.FrameToolCall))
		if err := p1.page.Answer(ctx, engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"ok"`)}); err != nil {
			t.Fatal(err)
		}
		p1.until("the first reply", finalIdle("saw: "))
		_ = p1.page.Send(ctx, "again") // call_1-2, which times out
		p1.until("tool.call", isType(engine.FrameToolCall))
		r.clock.Advance(time.Minute)
		p1.until("the second reply", finalIdle("saw: "))
		stop(t, e1)

		s2 := r.loaded(w, m, s1.ID())
		for _, tc := range []struct {
			id   string
			want error
		}{{"call_1", engine.ErrSettled}, {"call_1-2", engine.ErrStaleAttempt}} {
			if err := s2.Answer(ctx, engine.ToolResult{ID: tc.id, Attempt: 1, Result: json.RawMessage(`"late"`)}); !errors.Is(err, tc.want) {
				t.Errorf("a late answer to %s after the restart: %v, want %v", tc.id, err, tc.want)
			}
		}
	})
}

// TestStaleBusySummaryIsMended: a summary that says busy of a session whose
// journal ends idle (its node died between the append and the summary, or
// the summary's write failed) is written again when a start loads it, so
// the next start, and a cluster's look for sessions no node runs, do not
// load it again and again.
func TestStaleBusySummaryIsMended(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{}
		e1 := r.start(w, textModel())
		s, err := e1.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		if err := p.page.Send(context.Background(), "hello"); err != nil {
			t.Fatal(err)
		}
		p.until("the reply", isType(engine.EventSessionIdle))
		stop(t, e1)
		busy := func() bool {
			t.Helper()
			sums, err := r.store.Summaries(context.Background(), "alice")
			if err != nil || len(sums) != 1 {
				t.Fatalf("summaries %v %v", sums, err)
			}
			return sums[0].Busy
		}
		sums, _ := r.store.Summaries(context.Background(), "alice")
		stale := sums[0]
		stale.Busy = true
		if err := r.store.Summarize(context.Background(), stale); err != nil {
			t.Fatal(err)
		}
		r.resumed(w, textModel(), s.ID())
		// Idle once loaded (the memory store's journal may end in the
		// turn, which runs again and ends).
		for deadline := time.Now().Add(hangGuard); busy(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the summary still says busy after the start loaded the idle session")
			}
		}
	})
}
