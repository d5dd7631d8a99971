package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/testlog"
)

// half is an Options.Rand that always draws the middle of the jitter range,
// so backoffs are known: 1s → 500ms, 2s → 1s, ...
func half() float64 { return 0.5 }

// at is epoch + d, as the deadlines are written: RFC 3339 with milliseconds.
func at(d time.Duration) string { return epoch.Add(d).Format("2006-01-02T15:04:05.000Z07:00") }

// threeBy30s is the retry policy of the docs' timeline (docs/retries.md).
var threeBy30s = &engine.RetryPolicy{Attempts: 3, Timeout: "30s", Backoff: "1s", Multiplier: 2, MaxBackoff: "30s"}

// TestTimelineTwoTimeoutsThenSuccess is the timeline in docs/retries.md: a
// browser call that times out twice and succeeds on its third attempt, with
// a late answer to the first attempt ignored along the way.
func TestTimelineTwoTimeoutsThenSuccess(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: threeBy30s}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
	h.send("where am I?")

	// 0s: attempt 1, deadline 30s.
	c := recv(t, b.calls, "attempt 1")
	if c.Attempt != 1 || c.Attempts != 3 || c.Deadline != at(30*time.Second) {
		t.Fatalf("attempt 1: %+v", c)
	}
	// 30s: it times out; the browser is told to abort; attempt 2 follows after 500ms.
	h.clock.Advance(30 * time.Second)
	if r := recv(t, b.releases, "release 1"); r != (release{"call_1", 1, engine.CancelTimeout}) {
		t.Errorf("release %+v", r)
	}
	rt := h.waitType(engine.EventToolRetrying)
	if rt.Attempt != 1 || rt.Attempts != 3 || rt.Code != "timeout" || rt.Backoff != "500ms" || rt.Error != "get_location timed out after 30s (attempt 1 of 3)" {
		t.Errorf("tool.retrying %s", rt.Raw)
	}
	// 30.5s: attempt 2, deadline 60.5s.
	h.clock.Advance(500 * time.Millisecond)
	c = recv(t, b.calls, "attempt 2")
	if c.Attempt != 2 || c.Deadline != at(60500*time.Millisecond) {
		t.Fatalf("attempt 2: %+v", c)
	}
	// 45s: attempt 1's answer arrives late: ignored.
	h.clock.Advance(14500 * time.Millisecond)
	if err := h.s.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"Osaka"`)}); !errors.Is(err, engine.ErrStaleAttempt) {
		t.Errorf("late answer: %v, want ErrStaleAttempt", err)
	}
	// 60.5s: attempt 2 times out; attempt 3 follows after 1s.
	h.clock.Advance(15500 * time.Millisecond)
	if r := recv(t, b.releases, "release 2"); r != (release{"call_1", 2, engine.CancelTimeout}) {
		t.Errorf("release %+v", r)
	}
	if rt := h.waitType(engine.EventToolRetrying); rt.Attempt != 2 || rt.Backoff != "1s" {
		t.Errorf("tool.retrying %s", rt.Raw)
	}
	// 61.5s: attempt 3, deadline 91.5s.
	h.clock.Advance(time.Second)
	c = recv(t, b.calls, "attempt 3")
	if c.Attempt != 3 || c.Deadline != at(91500*time.Millisecond) {
		t.Fatalf("attempt 3: %+v", c)
	}
	// 70s: the browser answers attempt 3.
	h.clock.Advance(8500 * time.Millisecond)
	h.answer(engine.ToolResult{ID: "call_1", Attempt: 3, Result: json.RawMessage(`"Tokyo"`)})
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
	if n := len(w.requests(engine.TypeToolFinished)); n != 1 {
		t.Errorf("%d tool.finished triggers, want 1 (after the retries)", n)
	}
	// No timer is left behind.
	h.transcript()
	if n := h.clock.Pending(); n != 0 {
		t.Errorf("%d timers pending after the call settled", n)
	}
}

// TestTimeoutExhausted: a call whose every attempt times out settles as a
// terminal tool.error, code timeout, with text the model can read; the
// worker's context is cancelled at each timeout, the browser is told.
func TestTimeoutExhausted(t *testing.T) {
	for _, handler := range []engine.Handler{engine.HandlerClient, engine.HandlerWorker} {
		t.Run(string(handler), func(t *testing.T) {
			b := newBrowser()
			contexts := make(chan context.Context, 3)
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: handler, Retry: threeBy30s}}}}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				contexts <- ctx
				<-ctx.Done()
				return engine.Decision{}, ctx.Err()
			}
			h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
			h.send("where am I?")
			for attempt, backoff := range []time.Duration{500 * time.Millisecond, time.Second, 0} {
				h.waitFor("attempt start", func(f frame) bool { return f.Type == engine.EventToolStarted && f.Attempt == attempt+1 })
				var ctx context.Context
				if handler == engine.HandlerWorker {
					ctx = recv(t, contexts, "tool.execute")
				} else {
					recv(t, b.calls, "dispatch")
				}
				h.clock.Advance(30 * time.Second)
				if handler == engine.HandlerWorker {
					recv(t, ctx.Done(), "the attempt's context cancelled")
				} else if r := recv(t, b.releases, "release"); r != (release{"call_1", attempt + 1, engine.CancelTimeout}) {
					t.Errorf("release %+v", r)
				}
				if backoff > 0 {
					h.waitType(engine.EventToolRetrying)
					h.clock.Advance(backoff)
				}
			}
			fin := h.waitFinished("call_1")
			want := "get_location timed out: 3 attempts of 30s, no answer from the browser."
			if handler == engine.HandlerWorker {
				want = "get_location timed out: 3 attempts of 30s, no answer from the worker."
			}
			if fin.OK || fin.Error != want || fin.Code != string(engine.CodeTimeout) {
				t.Errorf("tool.finished %s; want %q, code timeout", fin.Raw, want)
			}
			h.waitIdle()
			if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || tm[0].Content != want || !tm[0].IsError {
				t.Errorf("the model saw %+v", tm)
			}
			if n := h.count(engine.EventError, ""); n != 0 {
				t.Errorf("%d error events: a worker's cancelled attempt is not a worker failure", n)
			}
		})
	}
}

// TestSingleAttemptTimeout: with no retry policy a call has one attempt.
func TestSingleAttemptTimeout(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "confirm", Handler: engine.HandlerClient}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`)), engine.Options{}, b)
	h.send("delete my draft")
	recv(t, b.calls, "dispatch")
	h.clock.Advance(30 * time.Second)
	fin := h.waitFinished("call_1")
	if fin.Error != "confirm timed out: 1 attempt of 30s, no answer from the browser." {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	if h.count(engine.EventToolRetrying, "") != 0 {
		t.Error("a single-attempt call retried")
	}
}

// TestTimeoutDefaults: a client attempt's limit is 30s and a worker's 5m
// unless Options or the call's policy say otherwise; tool.execute and the
// browser's tool.call carry the attempt and its deadline.
func TestTimeoutDefaults(t *testing.T) {
	tests := []struct {
		name    string
		opts    engine.Options
		handler engine.Handler
		retry   *engine.RetryPolicy
		want    time.Duration
	}{
		{"client default", engine.Options{}, engine.HandlerClient, nil, 30 * time.Second},
		{"worker default", engine.Options{}, engine.HandlerWorker, nil, 5 * time.Minute},
		{"client from Options", engine.Options{ClientTimeout: 10 * time.Second}, engine.HandlerClient, nil, 10 * time.Second},
		{"worker from Options", engine.Options{WorkerTimeout: time.Minute}, engine.HandlerWorker, nil, time.Minute},
		{"client from the policy", engine.Options{ClientTimeout: 10 * time.Second}, engine.HandlerClient, &engine.RetryPolicy{Timeout: "2m"}, 2 * time.Minute},
		{"worker from the policy", engine.Options{}, engine.HandlerWorker, &engine.RetryPolicy{Timeout: "45s"}, 45 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBrowser()
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "tool", Handler: tt.handler, Retry: tt.retry}}}}
			executes := make(chan engine.ToolExecute, 1)
			w.execute = func(ctx context.Context, t engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				executes <- t
				return engine.Decision{}, nil // answered later, or never
			}
			h := setup(t, w, callsThenSummary(use("call_1", "tool", `{}`)), tt.opts, b)
			h.send("go")
			var attempt int
			var deadline string
			if tt.handler == engine.HandlerClient {
				c := recv(t, b.calls, "dispatch")
				attempt, deadline = c.Attempt, c.Deadline
			} else {
				ex := recv(t, executes, "tool.execute")
				attempt, deadline = ex.Attempt, ex.Deadline
			}
			if attempt != 1 || deadline != at(tt.want) {
				t.Errorf("attempt %d, deadline %s; want 1, %s", attempt, deadline, at(tt.want))
			}
			if _, err := time.Parse(time.RFC3339, deadline); err != nil {
				t.Errorf("deadline %q is not RFC 3339: %v", deadline, err)
			}
			// Just before the deadline nothing happens; at it, the attempt times out.
			h.clock.Advance(tt.want - time.Millisecond)
			h.transcript() // the barrier: a due timer's callback has been handled
			for _, f := range h.drainBuffered() {
				if f.Type == engine.EventToolFinished || f.Type == engine.EventToolRetrying {
					t.Fatalf("the attempt timed out before its deadline: %s", f.Raw)
				}
			}
			h.clock.Advance(time.Millisecond)
			if fin := h.waitFinished("call_1"); fin.Code != string(engine.CodeTimeout) {
				t.Errorf("tool.finished %s", fin.Raw)
			}
		})
	}
}

// TestDefaultRetryCopied: a tool's declared retry is copied into the
// proposed tool.call; the worker may change it, and the declaration stays.
func TestDefaultRetryCopied(t *testing.T) {
	b := newBrowser()
	declared := &engine.RetryPolicy{Attempts: 3, Timeout: "10s"}
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: declared}}}}
	var proposals []string
	var mu sync.Mutex
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		case engine.ModelFinished:
			for _, a := range req.Proposed.Actions {
				if tc, ok := a.(engine.ToolCall); ok {
					mu.Lock()
					proposals = append(proposals, mustJSON(t, tc.Retry))
					mu.Unlock()
					// Edit the proposal in place: one attempt fewer.
					tc.Retry.Attempts--
				}
			}
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
	for turn, id := range []string{"call_1", "call_1-2"} {
		h.send(fmt.Sprintf("where am I? %d", turn))
		for attempt := 1; attempt <= 2; attempt++ {
			c := recv(t, b.calls, "dispatch")
			if c.ID != id || c.Attempt != attempt || c.Attempts != 2 || c.Deadline != at(h.clock.Now().Sub(epoch)+10*time.Second) {
				t.Fatalf("dispatch %+v", c)
			}
			h.clock.Advance(10 * time.Second)
			recv(t, b.releases, "release")
			if attempt == 1 {
				h.waitType(engine.EventToolRetrying)
				h.clock.Advance(500 * time.Millisecond)
			}
		}
		if fin := h.waitFinished(id); fin.Error != "get_location timed out: 2 attempts of 10s, no answer from the browser." {
			t.Errorf("tool.finished %s", fin.Raw)
		}
		h.waitIdle()
	}
	mu.Lock()
	defer mu.Unlock()
	for i, p := range proposals {
		if p != `{"attempts":3,"timeout":"10s"}` {
			t.Errorf("proposal %d has retry %s, want the declared one", i, p)
		}
	}
	if declared.Attempts != 3 || len(proposals) != 2 {
		t.Errorf("declared %+v after %d proposals", declared, len(proposals))
	}
}

// TestRetryableErrors: a retryable tool.error starts the next attempt after
// the backoff while attempts remain; a terminal one settles at once.
func TestRetryableErrors(t *testing.T) {
	busy := engine.ToolError{Error: "The service is busy.", Retryable: true, Code: engine.CodeToolFailed}
	gone := engine.ToolError{Error: "No such city.", Code: engine.CodeToolFailed}
	ok := engine.ToolResult{Result: json.RawMessage(`"clear"`)}
	tests := []struct {
		name    string
		answers []engine.Action // one per attempt
		okWant  bool
		text    string
	}{
		{"retryable then result", []engine.Action{busy, ok}, true, "clear"},
		{"two retryable then result", []engine.Action{busy, busy, ok}, true, "clear"},
		{"terminal with attempts left", []engine.Action{gone}, false, "No such city."},
		{"retryable then terminal", []engine.Action{busy, gone}, false, "No such city. (after 2 attempts)"},
		{"retryable on every attempt", []engine.Action{busy, busy, busy}, false, "The service is busy. (after 3 attempts)"},
		{"an answer whose code is timeout keeps its text", []engine.Action{engine.ToolError{Error: "The weather service timed out.", Code: engine.CodeTimeout}},
			false, "The weather service timed out."},
		{"a retryable error without text", []engine.Action{engine.ToolError{Retryable: true}, engine.ToolError{Retryable: true}, engine.ToolError{Retryable: true}},
			false, "lookup failed without saying why. (after 3 attempts)"},
	}
	for _, handler := range []engine.Handler{engine.HandlerWorker, engine.HandlerClient} {
		for _, tt := range tests {
			t.Run(string(handler)+"/"+tt.name, func(t *testing.T) {
				b := newBrowser()
				executes := make(chan engine.ToolExecute, 3)
				w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup", Handler: handler, Retry: threeBy30s}}}}
				w.execute = func(ctx context.Context, t engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					executes <- t
					return engine.Decision{Actions: []engine.Action{tt.answers[t.Attempt-1]}}, nil
				}
				h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{Rand: half}, b)
				h.send("go")
				for i, a := range tt.answers {
					attempt := i + 1
					if handler == engine.HandlerClient {
						c := recv(t, b.calls, "dispatch")
						if c.Attempt != attempt {
							t.Fatalf("dispatch %+v, want attempt %d", c, attempt)
						}
						switch a := a.(type) {
						case engine.ToolResult:
							a.ID, a.Attempt = c.ID, c.Attempt
							h.answer(a)
						case engine.ToolError:
							a.ID, a.Attempt = c.ID, c.Attempt
							h.answer(a)
						}
					} else if ex := recv(t, executes, "tool.execute"); ex.Attempt != attempt {
						t.Fatalf("tool.execute attempt %d, want %d", ex.Attempt, attempt)
					}
					if e, isErr := a.(engine.ToolError); isErr && e.Retryable && attempt < 3 {
						rt := h.waitType(engine.EventToolRetrying)
						wantCode := string(e.Code)
						if wantCode == "" {
							wantCode = string(engine.CodeToolFailed)
						}
						if rt.Attempt != attempt || rt.Code != wantCode || rt.Backoff != (time.Duration(1<<i)*500*time.Millisecond).String() {
							t.Errorf("tool.retrying %s", rt.Raw)
						}
						h.clock.Advance(time.Duration(1<<i) * 500 * time.Millisecond)
					}
				}
				fin := h.waitFinished("call_1")
				if fin.OK != tt.okWant || (tt.okWant && fin.Result != tt.text) || (!tt.okWant && fin.Error != tt.text) {
					t.Errorf("tool.finished %s; want ok=%v %q", fin.Raw, tt.okWant, tt.text)
				}
				h.waitIdle()
				if n := h.count(engine.EventToolStarted, "call_1"); n != len(tt.answers) {
					t.Errorf("%d attempts, want %d", n, len(tt.answers))
				}
			})
		}
	}
}

// TestStructuredErrorInfo: a tool.error's code and detail reach the
// tool.finished event; its text reaches the model.
func TestStructuredErrorInfo(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		return engine.Decision{Actions: []engine.Action{engine.ToolError{Error: "Rate limited; try again in a minute.", Code: "rate_limited", Detail: json.RawMessage(`{"retryAfter":60}`)}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{})
	h.send("go")
	fin := h.waitFinished("call_1")
	if fin.Code != "rate_limited" || string(fin.Detail) != `{"retryAfter":60}` {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	// The trigger keeps the seed's fields only.
	h.waitIdle()
	if got := mustJSON(t, w.requests(engine.TypeToolFinished)[0].Trigger); got != `{"type":"tool.finished","id":"call_1","ok":false,"name":"lookup","error":"Rate limited; try again in a minute."}` {
		t.Errorf("trigger %s", got)
	}
	if tm := toolMessages(h.model.last(t).Messages); tm[0].Content != "Rate limited; try again in a minute." {
		t.Errorf("the model saw %+v", tm)
	}
}

// TestSettleOnce: late, duplicate and stale answers are ignored (a debug
// log), never settle a call twice, and never reach the model.
func TestSettleOnce(t *testing.T) {
	t.Run("a retryable error repeated", func(t *testing.T) {
		// The error ended attempt 1 without settling the call: a repeat
		// of it is late, not settled (retries.md).
		b := newBrowser()
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: threeBy30s}}}}
		h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
		h.send("where")
		recv(t, b.calls, "attempt 1")
		busy := engine.ToolError{ID: "call_1", Attempt: 1, Error: "busy", Retryable: true}
		h.answer(busy)
		h.waitType(engine.EventToolRetrying)
		if err := h.s.Answer(context.Background(), busy); !errors.Is(err, engine.ErrStaleAttempt) {
			t.Errorf("the retryable error again: %v, want ErrStaleAttempt", err)
		}
	})
	t.Run("client", func(t *testing.T) {
		b := newBrowser()
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: threeBy30s}}}}
		h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
		h.send("where")
		recv(t, b.calls, "attempt 1")
		h.clock.Advance(30 * time.Second)
		h.waitType(engine.EventToolRetrying)
		ctx := context.Background()
		// During the backoff, attempt 1 answers late.
		if err := h.s.Answer(ctx, engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"late-1"`)}); !errors.Is(err, engine.ErrStaleAttempt) ||
			!strings.Contains(err.Error(), "attempt 1 ended; attempt 2 starts after its backoff") {
			t.Errorf("late answer in backoff: %v, want stale, naming no attempt current", err)
		}
		// Even naming no attempt, nothing is current during the backoff.
		if err := h.s.Answer(ctx, engine.ToolResult{ID: "call_1", Result: json.RawMessage(`"late-0"`)}); !errors.Is(err, engine.ErrStaleAttempt) {
			t.Errorf("answer without attempt in backoff: %v", err)
		}
		h.clock.Advance(500 * time.Millisecond)
		recv(t, b.calls, "attempt 2")
		if err := h.s.Answer(ctx, engine.ToolError{ID: "call_1", Attempt: 1, Error: "late-error", Retryable: true}); !errors.Is(err, engine.ErrStaleAttempt) {
			t.Errorf("late error from attempt 1: %v", err)
		}
		h.answer(engine.ToolResult{ID: "call_1", Attempt: 2, Result: json.RawMessage(`"Tokyo"`)})
		for _, dup := range []engine.Action{
			engine.ToolResult{ID: "call_1", Attempt: 2, Result: json.RawMessage(`"dup-2"`)},
			engine.ToolError{ID: "call_1", Attempt: 2, Error: "dup-error", Retryable: true},
		} {
			if err := h.s.Answer(ctx, dup); !errors.Is(err, engine.ErrSettled) {
				t.Errorf("answer after settling: %v, want ErrSettled", err)
			}
		}
		// Attempt 1 timed out: its answer is stale, settled call or not.
		if err := h.s.Answer(ctx, engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"late-again"`)}); !errors.Is(err, engine.ErrStaleAttempt) {
			t.Errorf("late answer from attempt 1 after settling: %v, want ErrStaleAttempt", err)
		}
		h.waitIdle()
		if n := h.count(engine.EventToolFinished, "call_1"); n != 1 {
			t.Errorf("settled %d times", n)
		}
		assertModelSawOnly(t, h, "Tokyo", "late", "dup")
		// Once settled, the clock holds nothing for the call.
		h.clock.Advance(time.Hour)
		h.transcript()
		if n := h.count(engine.EventToolStarted, "call_1"); n != 2 {
			t.Errorf("%d attempts, want 2", n)
		}
	})
	t.Run("worker", func(t *testing.T) {
		logs := &testlog.Buffer{}
		logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		lateGo := make(chan struct{})
		second := make(chan struct{})
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup", Retry: threeBy30s}}}}
		w.execute = func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			switch ex.Attempt {
			case 1:
				<-ctx.Done() // timed out...
				<-lateGo     // ...and answers anyway, late.
				return engine.Decision{Actions: []engine.Action{
					engine.ToolResult{Result: json.RawMessage(`"late-1"`)},
					engine.ClientEvent{Name: "late answer sent"},
				}}, nil
			default:
				<-second
				return engine.Decision{Actions: []engine.Action{
					engine.ToolResult{Attempt: 1, Result: json.RawMessage(`"stale-explicit"`)}, // names an old attempt
					engine.ToolResult{Result: json.RawMessage(`"fresh"`)},
					engine.ToolResult{Result: json.RawMessage(`"dup-2"`)}, // a duplicate in the same decision
					engine.ToolError{Error: "dup-error", Retryable: true},
				}}, nil
			}
		}
		h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{Rand: half, Logger: logger})
		h.send("go")
		h.waitType(engine.EventToolStarted)
		h.clock.Advance(30 * time.Second)
		h.waitType(engine.EventToolRetrying)
		h.clock.Advance(500 * time.Millisecond)
		h.waitFor("attempt 2", func(f frame) bool { return f.Type == engine.EventToolStarted && f.Attempt == 2 })
		close(lateGo)
		h.waitType(engine.EventClientEvent)
		close(second)
		fin := h.waitFinished("call_1")
		if !fin.OK || fin.Result != "fresh" {
			t.Errorf("tool.finished %s", fin.Raw)
		}
		h.waitIdle()
		if n := h.count(engine.EventToolFinished, "call_1"); n != 1 {
			t.Errorf("settled %d times", n)
		}
		if n := h.count(engine.EventError, ""); n != 0 {
			t.Errorf("ignored answers reported %d errors", n)
		}
		assertModelSawOnly(t, h, "fresh", "late", "stale", "dup")
		if n := strings.Count(logs.String(), "ignored tool answer"); n != 4 {
			t.Errorf("%d debug lines for ignored answers, want 4:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), "level=DEBUG") {
			t.Errorf("ignored answers are not logged at debug level:\n%s", logs)
		}
		// A worker that did not answer in time is the operator's to see
		// at --log-level warn.
		if !strings.Contains(logs.String(), `level=WARN msg="tool attempt timed out"`) {
			t.Errorf("a worker attempt's timeout is not logged at warn:\n%s", logs)
		}
	})
}

// assertModelSawOnly checks the model's last transcript has one tool
// message, want, and that no request ever carried a banned text.
func assertModelSawOnly(t *testing.T, h *harness, want string, banned ...string) {
	t.Helper()
	if tm := toolMessages(h.model.last(t).Messages); len(tm) != 1 || tm[0].Content != want {
		t.Errorf("the model saw %+v, want one tool message %q", tm, want)
	}
	for _, req := range h.model.requests() {
		for _, m := range req.Messages {
			for _, b := range banned {
				if strings.Contains(m.Content, b) {
					t.Errorf("the model saw %q: %+v", b, m)
				}
			}
		}
	}
}

// TestCancelStopsRetries: Cancel settles a call in its backoff as
// cancelled, and no further attempt starts.
func TestCancelStopsRetries(t *testing.T) {
	b := newBrowser()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient, Retry: threeBy30s}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "get_location", `{}`)), engine.Options{Rand: half}, b)
	h.send("where")
	recv(t, b.calls, "attempt 1")
	h.clock.Advance(30 * time.Second)
	recv(t, b.releases, "release")
	h.waitType(engine.EventToolRetrying)
	if err := h.s.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	fin := h.waitFinished("call_1")
	if fin.Code != string(engine.CodeCancelled) || fin.Error != "get_location was cancelled: cancelled by the user." {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	h.waitIdle()
	h.clock.Advance(time.Hour)
	h.transcript()
	if len(b.calls) != 0 || len(b.releases) != 0 {
		t.Errorf("after cancel: %d dispatches, %d releases", len(b.calls), len(b.releases))
	}
	if n := h.clock.Pending(); n != 0 {
		t.Errorf("%d timers pending", n)
	}
}

// TestBadRetryOnWorkerCall: a worker's tool.call with a policy that does
// not parse fails the call with the reason and reports the bad decision.
func TestBadRetryOnWorkerCall(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		switch req.Trigger.(type) {
		case engine.SessionStart:
			agent := w.agent
			return engine.Decision{Agent: &agent}, nil
		case engine.UserMessage:
			return engine.Decision{Actions: []engine.Action{engine.ToolCall{ID: "c1", Name: "lookup", Retry: &engine.RetryPolicy{Attempts: -2}}}}, nil
		}
		return req.Proposed, nil
	}
	h := setup(t, w, callsThenSummary(), engine.Options{})
	h.send("go")
	ev := h.waitType(engine.EventError)
	if ev.Code != "bad_decision" || !strings.Contains(ev.errorText(), "attempts is -2, want at least 1") {
		t.Errorf("error %s", ev.Raw)
	}
	fin := h.waitFinished("c1")
	if fin.Code != string(engine.CodeInternal) || !strings.Contains(fin.Error, "could not start") {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	if n := len(w.requests(engine.TypeToolExecute)); n != 0 {
		t.Errorf("the call ran %d times", n)
	}
}

// TestRealClockWorkerTimeout: on the real clock too, a worker attempt that
// outlives its timeout ends as a timeout, not as a worker failure: the
// attempt's context is cancelled by the engine's timer, after the timeout
// is recorded, never by a second timer of its own.
func TestRealClockWorkerTimeout(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "slow",
		Retry: &engine.RetryPolicy{Attempts: 2, Timeout: "20ms", Backoff: "1ms"}}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		<-ctx.Done()
		return engine.Decision{}, ctx.Err()
	}
	h := setup(t, w, callsThenSummary(use("call_1", "slow", `{}`)), engine.Options{Clock: clock.Real{}})
	h.send("go")
	if rt := h.waitType(engine.EventToolRetrying); rt.Code != string(engine.CodeTimeout) {
		t.Errorf("tool.retrying %s", rt.Raw)
	}
	fin := h.waitFinished("call_1")
	if fin.Code != string(engine.CodeTimeout) || fin.Error != "slow timed out: 2 attempts of 20ms, no answer from the worker." {
		t.Errorf("tool.finished %s", fin.Raw)
	}
	h.waitIdle()
	if n := h.count(engine.EventError, ""); n != 0 {
		t.Errorf("%d error events: %s", n, h.types())
	}
}

// TestWorkerAnswerForAnAttemptNotStarted: a worker's answer naming an
// attempt past the call's current cannot be a late one: the worker is told
// (bad_decision, as for an unknown call), where it was dropped without a
// word and the call waited for its timeout with nobody knowing why. A
// worker's empty tool.error settles the call as a failure, said in words.
func TestWorkerAnswerForAnAttemptNotStarted(t *testing.T) {
	first := true
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.execute = func(ctx context.Context, ex engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		if first {
			first = false
			return engine.Decision{Actions: []engine.Action{
				engine.ToolResult{Attempt: 7, Result: json.RawMessage(`"too soon"`)},
				engine.ToolError{Error: ""},
			}}, nil
		}
		return engine.Decision{}, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{})
	h.send("go")
	e := h.waitType(engine.EventError)
	if e.Code != string(engine.WireBadDecision) || !strings.Contains(e.errorText(), "attempt 7") || !strings.Contains(e.errorText(), "never started") {
		t.Errorf("the error for an answer to attempt 7: %s", e.Raw)
	}
	fin := h.waitFinished("call_1")
	if fin.OK || fin.Error != "lookup failed without saying why." {
		t.Errorf("the call after an empty tool.error: %s", fin.Raw)
	}
}

// TestSubagentTimeoutSaysWhoDidNotAnswer: a delegated call that runs out of
// attempts says the sub-agent did not answer: the worker did, with
// tool.delegate ("no answer from the worker" sent the model, and the
// operator, to the wrong party).
func TestSubagentTimeoutSaysWhoDidNotAnswer(t *testing.T) {
	root := callsThenSummary(use("call_1", "research", `{}`))
	helper, started, cut := blockingHelper()
	w := delegating(engine.AgentTool{Name: "research", Retry: &engine.RetryPolicy{Attempts: 1, Timeout: "10s"}})
	h := setup(t, w, root, engine.Options{Models: models(root, helper)})
	h.send("go")
	recv(t, started, "the helper's model turn")
	h.clock.Advance(10 * time.Second)
	recv(t, cut, "the helper's turn cut by the timeout")
	fin := h.waitFinished("call_1")
	if want := "research timed out: 1 attempt of 10s, no answer from the sub-agent the worker delegated it to."; fin.OK || fin.Error != want {
		t.Errorf("research finished %s, want the error %q", fin.Raw, want)
	}
}

// TestWorkerAnswerInTheDecisionThatCalls: a decision that makes a call and
// answers it finds no attempt started (they start once the whole decision
// has run), and is told so in words that say what to do.
func TestWorkerAnswerInTheDecisionThatCalls(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model", Tools: w.agent.Tools}}, nil
		}
		if m, ok := req.Trigger.(engine.UserMessage); ok && m.Message.Content == "settle" {
			return engine.Decision{Actions: []engine.Action{
				engine.ToolCall{ID: "cc1", Name: "lookup", Arguments: json.RawMessage(`{}`)},
				engine.ToolResult{ID: "cc1", Attempt: 1, Result: json.RawMessage(`"by the worker"`)},
			}}, nil
		}
		return req.Proposed, nil
	}
	h := setup(t, w, textModel(), engine.Options{})
	h.send("settle")
	e := h.waitType(engine.EventError)
	if e.Code != string(engine.WireBadDecision) || !strings.Contains(e.errorText(), `"cc1" has not started its first attempt`) || !strings.Contains(e.errorText(), "answer one in a later decision") {
		t.Errorf("the error for an answer in the decision that made the call: %s", e.Raw)
	}
}

// TestAttemptContextSaysWhyItEnded: a worker attempt's context ended by
// its timeout has ErrAttemptTimedOut for its cause, and one a Stop ended
// context.Canceled: the HTTP worker's metrics count the first as the
// worker's timeout, the second as not its failure.
func TestAttemptContextSaysWhyItEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *harness)
		want error
	}{
		{"timeout", func(h *harness) { h.clock.Advance(30 * time.Second) }, engine.ErrAttemptTimedOut},
		{"stop", func(h *harness) {
			if err := h.s.Cancel(context.Background()); err != nil {
				t.Error(err)
			}
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			causes := make(chan error, 1)
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup", Retry: &engine.RetryPolicy{Attempts: 1, Timeout: "30s"}}}}}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return engine.Decision{}, ctx.Err()
			}
			h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{})
			h.send("go")
			h.waitType(engine.EventToolStarted)
			tc.end(h)
			if got := recv(t, causes, "the attempt's end"); !errors.Is(got, tc.want) {
				t.Errorf("context.Cause = %v, want %v", got, tc.want)
			}
			h.waitIdle()
		})
	}
}
