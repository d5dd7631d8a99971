package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// TestNotTwice: a tool that declares idempotent: false is not tried again
// once an attempt may have run: a timeout after its page got the call, a
// worker attempt's timeout, or its page leaving, settle outcome_unknown;
// a tool that says nothing keeps its retry policy.
func TestNotTwice(t *testing.T) {
	no := false
	for _, tt := range []struct {
		name       string
		idempotent *bool
		handler    engine.Handler
		leave      bool // the page leaves mid-attempt, another stays; else the attempt times out
		fails      bool // the worker fails (an error, a panic, a 500) instead of answering
		want       string
	}{
		{"client, timed out", &no, engine.HandlerClient, false, false, "outcome_unknown"},
		{"client, its page left", &no, engine.HandlerClient, true, false, "outcome_unknown"},
		{"worker, timed out", &no, engine.HandlerWorker, false, false, "outcome_unknown"},
		{"worker, failed", &no, engine.HandlerWorker, false, true, "outcome_unknown"},
		{"worker, says nothing, failed", nil, engine.HandlerWorker, false, true, "retried"},
		{"client, says nothing, timed out", nil, engine.HandlerClient, false, false, "retried"},
		{"client, says nothing, its page left", nil, engine.HandlerClient, true, false, "moved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &testWorker{
				agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Handler: tt.handler, Idempotent: tt.idempotent,
					Retry: &engine.RetryPolicy{Attempts: 3, Timeout: "1s", Backoff: "0s"}}}},
				execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					if tt.fails {
						return engine.Decision{}, errors.New("the payment service answered 500")
					}
					<-ctx.Done() // never answers
					return engine.Decision{}, ctx.Err()
				},
			}
			b := newBrowser()
			h := setup(t, w, callsThenSummary(use("call_1", "pay", `{}`)), engine.Options{}, b)
			var other *reader // the page that stays, when the first leaves
			if tt.leave {
				other = attach(t, h.s, h.s.LastSeq(), "pay")
			}
			// The page that sends the message runs its calls (the lease).
			if err := h.page.Send(context.Background(), "pay the bill"); err != nil {
				t.Fatal(err)
			}
			h.waitType(engine.EventToolStarted)
			if tt.handler == engine.HandlerClient {
				recv(t, b.calls, "the call on the first page")
			}
			switch {
			case tt.leave:
				h.page.Detach()
			case !tt.fails:
				h.clock.Advance(1100 * time.Millisecond)
			}
			if tt.leave {
				got := other.until("the outcome", func(ev engine.Event) bool {
					return ev.Type == engine.EventToolFinished || ev.Type == engine.EventToolLeased
				})
				last := got[len(got)-1]
				switch {
				case tt.want == "moved" && last.Type != engine.EventToolLeased,
					tt.want == "outcome_unknown" && !strings.Contains(string(last.Frame), `"code":"outcome_unknown"`):
					t.Errorf("after the page left: %s, want %s", last.Frame, tt.want)
				}
				return
			}
			switch tt.want {
			case "outcome_unknown":
				fin := h.waitFinished("call_1")
				if fin.OK || fin.Code != string(engine.CodeOutcomeUnknown) || !strings.Contains(fin.Error, "may or may not have taken effect") {
					t.Errorf("tool.finished %s, want outcome_unknown", fin.Raw)
				}
				if n := h.count(engine.EventToolStarted, "call_1"); n != 1 {
					t.Errorf("%d attempts started, want 1", n)
				}
			case "retried":
				h.waitType(engine.EventToolRetrying)
			}
		})
	}
}

// TestStopNotTwice: Stop pressed while a tool that must not run twice
// runs settles it cancelled, and tells the model it may have taken effect
// (a payment's request may be out): "cancelled" alone read as "did not
// happen", and the model paid again when asked. A tool that says nothing,
// or one stopped before its attempt reached its page, is just cancelled.
func TestStopNotTwice(t *testing.T) {
	no := false
	for _, tt := range []struct {
		name       string
		idempotent *bool
		handler    engine.Handler
		delivered  bool // the attempt reached the page before Stop
		unknown    bool // the model reads that it may have taken effect
	}{
		{"client, running", &no, engine.HandlerClient, true, true},
		{"worker, running", &no, engine.HandlerWorker, true, true},
		{"client, waiting for a page", &no, engine.HandlerClient, false, false},
		{"client, says nothing, running", nil, engine.HandlerClient, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &testWorker{
				agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Handler: tt.handler, Idempotent: tt.idempotent}}},
				execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
					<-ctx.Done()
					return engine.Decision{}, ctx.Err()
				},
			}
			b := newBrowser()
			h := setup(t, w, callsThenSummary(use("call_1", "pay", `{}`)), engine.Options{}, b)
			var fin frame
			if !tt.delivered {
				h.page.Detach() // the call waits for a page that declares pay
				other := attach(t, h.s, h.s.LastSeq())
				if err := other.page.Send(context.Background(), "pay the bill"); err != nil {
					t.Fatal(err)
				}
				other.until("the call", isType(engine.EventToolStarted))
				if err := other.page.Cancel(context.Background()); err != nil {
					t.Fatal(err)
				}
				got := other.until("its end", isType(engine.EventToolFinished))
				fin = decodeFrame(t, got[len(got)-1])
			} else {
				if err := h.page.Send(context.Background(), "pay the bill"); err != nil {
					t.Fatal(err)
				}
				h.waitType(engine.EventToolStarted)
				if tt.handler == engine.HandlerClient {
					recv(t, b.calls, "the call on the page")
				}
				if err := h.page.Cancel(context.Background()); err != nil {
					t.Fatal(err)
				}
				fin = h.waitFinished("call_1")
			}
			if fin.OK || fin.Code != string(engine.CodeCancelled) {
				t.Fatalf("tool.finished %s, want cancelled", fin.Raw)
			}
			if got := strings.Contains(fin.Error, "may or may not have taken effect"); got != tt.unknown {
				t.Errorf("tool.finished %s: says it may have taken effect %v, want %v", fin.Raw, got, tt.unknown)
			}
		})
	}
}

// TestNotTwiceAfterRestart: a client attempt that reached its page before
// the gateway restarted settles interrupted when its tool declares
// idempotent: false, instead of going to a page again.
func TestNotTwiceAfterRestart(t *testing.T) {
	for _, closesPages := range []bool{false, true} {
		name := "stopped"
		if closesPages {
			// The gateway's shutdown closes the page's socket (1001) before
			// the engine closes: the page did not leave on its own.
			name = "its shutdown closes the page first"
		}
		t.Run(name, func(t *testing.T) { testNotTwiceAfterRestart(t, closesPages) })
	}
}

func testNotTwiceAfterRestart(t *testing.T, closesPages bool) {
	no := false
	forEachStore(t, func(t *testing.T, r *rig) {
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Handler: engine.HandlerClient, Idempotent: &no}}}}
		m := callsThenSummary(use("call_1", "pay", `{}`))
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0, "pay")
		other := attach(t, s1, 0, "pay") // would be given the call, were the first page leaving on its own
		_ = p1.page.Send(context.Background(), "pay the bill")
		p1.until("the call", isType(engine.FrameToolCall))
		if closesPages {
			e1.Closing()
			p1.page.Detach()
			if _, err := s1.Transcript(context.Background()); err != nil { // the detach is handled
				t.Fatal(err)
			}
			other.page.Detach()
		}
		stop(t, e1)
		for {
			select {
			case ev := <-other.frames:
				if ev.Type == engine.FrameToolCall {
					t.Errorf("the call went to the other page as the gateway stopped: %s", ev.Frame)
				}
				continue
			default:
			}
			break
		}

		s2 := r.resumed(w, m, s1.ID())
		got := attach(t, s2, 0, "pay").until("the reply", finalIdle("saw: "))
		for _, ev := range got {
			if ev.Type == engine.EventToolFinished && !strings.Contains(string(ev.Frame), `"code":"interrupted"`) {
				t.Errorf("tool.finished %s, want interrupted", ev.Frame)
			}
			if ev.Type == engine.FrameToolCall {
				t.Errorf("the call went to a page again: %s", ev.Frame)
			}
		}
		checkJournal(t, r.store, s1.ID())
	})
}
