package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/metrics"
)

// approvalRig is a session whose agent's "pay" tool asks for approval.
func approvalRig(t *testing.T) (*harness, *atomic.Int64) {
	return approvalRigWith(t, engine.Options{})
}

func approvalRigWith(t *testing.T, opts engine.Options) (*harness, *atomic.Int64) {
	var runs atomic.Int64
	w := &testWorker{
		agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Approval: engine.ApprovalAlways, Retry: &engine.RetryPolicy{Timeout: "1m"}}}},
		execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
			runs.Add(1)
			return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"paid"`)}}}, nil
		},
	}
	h := setup(t, w, callsThenSummary(use("call_1", "pay", `{"amount":5}`)), opts, newBrowser())
	return h, &runs
}

// asked waits for the tool.approval and returns its digest.
func asked(t *testing.T, h *harness) string {
	t.Helper()
	f := h.waitType(engine.EventToolApproval)
	var ev engine.ToolApprovalEvent
	if err := json.Unmarshal(f.Raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != "call_1" || ev.Name != "pay" || ev.Arguments != `{"amount":5}` || ev.Digest == "" || ev.Deadline == "" {
		t.Fatalf("tool.approval %s", f.Raw)
	}
	return ev.Digest
}

// TestApprovalGate: a tool with approval "always" runs only once the user
// approves; denied, it settles denied and never runs; an approval for
// another call or other arguments is refused; the first answer wins.
func TestApprovalGate(t *testing.T) {
	t.Run("approved", func(t *testing.T) {
		h, runs := approvalRig(t)
		h.send("pay")
		digest := asked(t, h)
		if runs.Load() != 0 {
			t.Fatal("the tool ran before it was approved")
		}
		if err := h.page.Approve(context.Background(), engine.ToolApprove{ID: "call_1", Digest: digest, Approved: true}); err != nil {
			t.Fatal(err)
		}
		if f := h.waitType(engine.EventToolApproved); !strings.Contains(string(f.Raw), `"approved":true`) || !strings.Contains(string(f.Raw), h.page.ID()) {
			t.Errorf("tool.approved %s", f.Raw)
		}
		if fin := h.waitFinished("call_1"); !fin.OK {
			t.Errorf("tool.finished %s", fin.Raw)
		}
		if runs.Load() != 1 {
			t.Errorf("the tool ran %d times, want 1", runs.Load())
		}
		if err := h.page.Approve(context.Background(), engine.ToolApprove{ID: "call_1", Digest: digest, Approved: false}); !errors.Is(err, engine.ErrSettled) {
			t.Errorf("a second answer: %v, want ErrSettled", err)
		}
	})
	t.Run("denied", func(t *testing.T) {
		m := metrics.New()
		h, runs := approvalRigWith(t, engine.Options{Metrics: m})
		h.send("pay")
		digest := asked(t, h)
		if err := h.s.Approve(context.Background(), engine.ToolApprove{ID: "call_1", Digest: "0000", Approved: true}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("an approval with another digest: %v, want ErrBadRequest", err)
		}
		if err := h.s.Approve(context.Background(), engine.ToolApprove{ID: "call_1", Digest: digest}); err != nil {
			t.Fatal(err)
		}
		fin := h.waitFinished("call_1")
		if fin.OK || fin.Code != string(engine.CodeDenied) || !strings.Contains(fin.Error, "The user denied pay") {
			t.Errorf("tool.finished %s, want denied", fin.Raw)
		}
		h.waitIdle()
		if runs.Load() != 0 {
			t.Errorf("a denied tool ran %d times", runs.Load())
		}
		// The call settled without an attempt: the histogram says 0, as its span does.
		if hist := metricOf(t, m, "gateway_tool_call_attempts").GetHistogram(); hist.GetSampleCount() != 1 || hist.GetSampleSum() != 0 {
			t.Errorf("gateway_tool_call_attempts: %d calls, %g attempts; want 1 call of 0 attempts", hist.GetSampleCount(), hist.GetSampleSum())
		}
	})
	t.Run("a call that asks none", func(t *testing.T) {
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_local_time", Handler: engine.HandlerClient}}}}
		b := newBrowser()
		b.tools = []string{"get_local_time"}
		h := setup(t, w, callsThenSummary(use("call_1", "get_local_time", `{}`)), engine.Options{}, b)
		h.send("what time is it")
		recv(t, b.calls, "the tool.call")
		if err := h.page.Approve(context.Background(), engine.ToolApprove{ID: "call_1", Digest: "x", Approved: true}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("an approval of a call that asks none: %v, want ErrBadRequest (not settled: it waits for its answer)", err)
		}
		if err := h.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`{"time":"09:00"}`)}); err != nil {
			t.Fatalf("its answer after the refused approval: %v", err)
		}
		if fin := h.waitFinished("call_1"); !fin.OK {
			t.Errorf("tool.finished %s", fin.Raw)
		}
	})
	t.Run("unanswered", func(t *testing.T) {
		h, runs := approvalRig(t)
		h.send("pay")
		asked(t, h)
		h.clock.Advance(61 * time.Second)
		if fin := h.waitFinished("call_1"); fin.Code != string(engine.CodeTimeout) || !strings.Contains(fin.Error, "did not approve") {
			t.Errorf("tool.finished %s, want a timeout", fin.Raw)
		}
		if runs.Load() != 0 {
			t.Errorf("an unapproved tool ran %d times", runs.Load())
		}
	})
}

// TestApprovalAcrossARestart: a call waiting for approval when the gateway
// restarts still waits, the page sees the question again in the replay, and
// approving it runs the call once.
func TestApprovalAcrossARestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		var runs atomic.Int64
		w := &testWorker{
			agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Approval: engine.ApprovalAlways}}},
			execute: func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				runs.Add(1)
				return engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: json.RawMessage(`"paid"`)}}}, nil
			},
		}
		m := callsThenSummary(use("call_1", "pay", `{}`))
		e1 := r.start(w, m)
		s1, _ := e1.Open(context.Background(), engine.OpenOptions{})
		p1 := attach(t, s1, 0)
		_ = p1.page.Send(context.Background(), "pay")
		p1.until("the question", isType(engine.EventToolApproval))
		stop(t, e1)

		s2 := r.loaded(w, m, s1.ID())
		p2 := attach(t, s2, 0)
		got := p2.until("the question again", isType(engine.EventToolApproval))
		var ev engine.ToolApprovalEvent
		_ = json.Unmarshal(got[len(got)-1].Frame, &ev)
		if err := p2.page.Approve(context.Background(), engine.ToolApprove{ID: ev.ID, Digest: ev.Digest, Approved: true}); err != nil {
			t.Fatal(err)
		}
		p2.until("the reply", finalIdle("saw: "))
		if runs.Load() != 1 {
			t.Errorf("the tool ran %d times, want 1", runs.Load())
		}
		checkJournal(t, r.store, s1.ID())
	})
}

// TestApprovalOfAToolNoPageRuns: a client tool that asks for approval,
// which no page of the session runs nor declared, fails at once with
// client_unavailable, as any call of it does, without asking the user to
// approve what cannot run.
func TestApprovalOfAToolNoPageRuns(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Handler: engine.HandlerClient, Approval: engine.ApprovalAlways}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "pay", `{"amount":5}`)), engine.Options{})
	h.send("pay")
	fin := h.waitFinished("call_1")
	if fin.OK || fin.Code != string(engine.CodeClientUnavailable) {
		t.Errorf("the call finished %s, want client_unavailable", fin.Raw)
	}
	if n := h.count(engine.EventToolApproval, ""); n != 0 {
		t.Errorf("the user was asked to approve it %d times; seen %s", n, h.types())
	}
}

// TestAnswerWhileApprovalAsked: an answer to a call that waits for the
// user's approval says so, where it told the page to answer in a later
// decision, a worker's matter.
func TestAnswerWhileApprovalAsked(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "pay", Handler: engine.HandlerClient, Approval: engine.ApprovalAlways}}}}
	h := setup(t, w, callsThenSummary(use("call_1", "pay", `{"amount":5}`)), engine.Options{}, newBrowser())
	h.send("pay")
	asked(t, h)
	err := h.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"paid"`)})
	if !errors.Is(err, engine.ErrStaleAttempt) || !strings.Contains(err.Error(), `"call_1" waits for the user's approval`) {
		t.Errorf("an answer while the approval is asked: %v, want a stale attempt that says it waits for approval", err)
	}
}
