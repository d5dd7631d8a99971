package httpworker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRequestOutcomeNoSlot: a request whose time runs out while the
// gateway's own bound on open requests is full never reached the worker,
// so it counts as no_slot, not as the worker's timeout: the operator
// raises the bound (--worker-max-in-flight), not the worker's capacity.
func TestRequestOutcomeNoSlot(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		arrived <- struct{}{}
		<-release
		answer(w, engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: []byte(`"sunny"`)}}})
	}))
	defer srv.Close()
	m := metrics.New()
	w := newWorker(t, srv.URL, Options{Metrics: m, MaxInFlight: 1})
	holding := make(chan error, 1)
	go func() {
		_, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: execTrigger(time.Now().Add(time.Minute))})
		holding <- err
	}()
	<-arrived

	tests := []struct {
		name    string
		end     func(ctx context.Context) (context.Context, func()) // how the waiting request's context ends
		outcome string
		why     string
	}{
		{"its deadline passes", func(ctx context.Context) (context.Context, func()) {
			return context.WithTimeout(ctx, 50*time.Millisecond)
		}, "no_slot", "time ran out while it waited"},
		{"its attempt times out", func(ctx context.Context) (context.Context, func()) {
			ctx, stop := context.WithCancelCause(ctx)
			time.AfterFunc(50*time.Millisecond, func() { stop(engine.ErrAttemptTimedOut) })
			return ctx, func() { stop(nil) }
		}, "no_slot", "time ran out while it waited"},
		{"the engine stops it", func(ctx context.Context) (context.Context, func()) {
			ctx, stop := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, stop)
			return ctx, stop
		}, "cancelled", "cancelled while it waited"},
	}
	want := map[string]int{}
	for _, tt := range tests {
		ctx, done := tt.end(context.Background())
		d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: execTrigger(time.Now().Add(time.Minute))})
		done()
		if err != nil {
			t.Fatalf("%s: Decide: %v", tt.name, err)
		}
		te, ok := d.Actions[0].(engine.ToolError)
		if !ok || !strings.Contains(te.Error, "limit of 1 open tool calls to the worker was reached") || !strings.Contains(te.Error, tt.why) {
			t.Errorf("%s: Decide = %+v, want a tool.error saying the request %s", tt.name, d.Actions, tt.why)
		}
		want[tt.outcome]++
	}
	close(release)
	if err := <-holding; err != nil {
		t.Fatalf("the request holding the slot: %v", err)
	}
	wantRequests(t, m,
		fmt.Sprintf(`gateway_worker_requests_total{outcome="cancelled",trigger="tool.execute"} %d`, want["cancelled"]),
		fmt.Sprintf(`gateway_worker_requests_total{outcome="no_slot",trigger="tool.execute"} %d`, want["no_slot"]),
		`gateway_worker_requests_total{outcome="ok",trigger="tool.execute"} 1`)
}

// TestASlotAfterTheDeadlineIsNotUsed: a tool.execute that gets its slot
// only after its attempt's deadline is not sent: the engine ignores an
// answer to an attempt that timed out, and may be running the next one,
// so the worker would run the tool for nothing, or twice. It fails as
// no_slot once the engine ends the attempt, not before: the engine's own
// clock times attempts out.
func TestASlotAfterTheDeadlineIsNotUsed(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan string, 2)
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		id := req.Trigger.(engine.ToolExecute).ID
		arrived <- id
		if id == "call_holding" {
			<-release
		}
		answer(w, engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: []byte(`"sunny"`)}}})
	}))
	defer srv.Close()
	m := metrics.New()
	w := newWorker(t, srv.URL, Options{Metrics: m, MaxInFlight: 1})
	holding := execTrigger(time.Now().Add(time.Minute))
	holding.ID = "call_holding"
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _ = w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: holding})
	}()
	<-arrived

	late := execTrigger(time.Now().Add(100 * time.Millisecond))
	late.ID = "call_late"
	ctx, timeOut := context.WithCancelCause(context.Background())
	defer timeOut(nil)
	time.AfterFunc(200*time.Millisecond, func() { close(release) }) // the slot frees past the deadline
	ended := make(chan time.Time, 1)
	time.AfterFunc(400*time.Millisecond, func() { // the engine's timer, late as a busy session's
		ended <- time.Now()
		timeOut(engine.ErrAttemptTimedOut)
	})
	d, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: late})
	returned := time.Now()
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if te, ok := d.Actions[0].(engine.ToolError); !ok || !strings.Contains(te.Error, "time ran out while it waited") {
		t.Errorf("Decide = %+v, want a tool.error saying its time ran out waiting", d.Actions)
	}
	select {
	case at := <-ended:
		if returned.Before(at) {
			t.Errorf("Decide returned before the engine ended the attempt")
		}
	default:
		t.Errorf("Decide returned before the engine ended the attempt")
	}
	select {
	case id := <-arrived:
		t.Errorf("%s reached the worker after its deadline", id)
	default:
	}
	<-held
	wantRequests(t, m,
		`gateway_worker_requests_total{outcome="no_slot",trigger="tool.execute"} 1`,
		`gateway_worker_requests_total{outcome="ok",trigger="tool.execute"} 1`)
}

// TestToolRunsLeaveRoomForDecisions: slow tools hold MaxInFlight slots of
// their own, so the decisions a chat waits on (a message, a settled call)
// still reach the worker while every tool slot is held.
func TestToolRunsLeaveRoomForDecisions(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan string, 8)
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		if exec, ok := req.Trigger.(engine.ToolExecute); ok {
			arrived <- exec.ID
			<-release
			answer(w, engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: []byte(`"done"`)}}})
			return
		}
		answer(w, req.Proposed)
	}))
	defer srv.Close()
	var letGo sync.Once
	free := func() { letGo.Do(func() { close(release) }) }
	defer free() // before the server closes: it waits for the held runs
	w := newWorker(t, srv.URL, Options{MaxInFlight: 4})
	done := make(chan struct{})
	for i := range 5 {
		tr := execTrigger(time.Now().Add(time.Minute))
		tr.ID = fmt.Sprint("call_", i)
		go func() {
			defer func() { done <- struct{}{} }()
			if _, err := w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: tr}); err != nil {
				t.Errorf("Decide(%s): %v", tr.ID, err)
			}
		}()
	}
	for range 4 {
		<-arrived
	}
	waitFor(t, func() bool { return w.waiting.Load() == 1 }) // the fifth tool waits

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg := engine.UserMessage{Message: model.Message{Role: "user", Content: "hello"}}
	if _, err := w.Decide(ctx, engine.DecideRequest{Session: "s2", Trigger: msg, Proposed: engine.Decision{}}); err != nil {
		t.Errorf("a message's decision while four tools run: %v", err)
	}
	select {
	case id := <-arrived:
		t.Errorf("%s reached the worker while four tools held every slot", id)
	default:
	}
	free()
	for range 5 {
		<-done
	}
}

// TestADecisionWaitsForItsOwnSlot: a trigger other than tool.execute waits
// for one of the decisions' slots while they are all taken, and one whose
// time runs out fails as the worker's failure would, naming the bound,
// counted no_slot and left out of the worker's latency.
func TestADecisionWaitsForItsOwnSlot(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	srv := httptest.NewServer(verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
		arrived <- struct{}{}
		<-release
		answer(w, req.Proposed)
	}))
	defer srv.Close()
	m := metrics.New()
	w := newWorker(t, srv.URL, Options{Metrics: m, MaxInFlight: 1})
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _ = w.Decide(context.Background(), engine.DecideRequest{Session: "s1", Trigger: engine.SessionStart{Session: "s1"}})
	}()
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	msg := engine.UserMessage{Message: model.Message{Role: "user", Content: "hello"}}
	_, err := w.Decide(ctx, engine.DecideRequest{Session: "s2", Trigger: msg})
	if !errors.Is(err, engine.ErrWorker) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "limit of 1 open decisions to the worker") {
		t.Errorf("Decide while every decision slot is taken = %v, want a deadline error naming the bound", err)
	}
	close(release)
	<-held
	wantRequests(t, m,
		`gateway_worker_requests_total{outcome="no_slot",trigger="message"} 1`,
		`gateway_worker_requests_total{outcome="ok",trigger="session.start"} 1`)
	if n := testutil.CollectAndCount(m.Registry(), "gateway_worker_request_seconds"); n != 1 {
		t.Errorf("%d series of the worker's latency, want 1: session.start's alone", n)
	}
}
