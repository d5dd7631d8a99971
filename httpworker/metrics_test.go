package httpworker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRequestOutcomes: each request to the worker counts once, by trigger
// and by how it ended, so an operator tells a worker that is down, slow,
// failing or answering nonsense from a tool that said no (a tool.execute
// failure is a tool.error to the engine, settled tool_failed either way),
// and from a call the engine ended itself.
func TestRequestOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: the worker is down
		cancel  bool             // the engine ends the attempt while it runs
		cause   error            // why it ended it (nil: a stop, context.Canceled)
		outcome string
	}{
		{name: "answered", handler: verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
			answer(w, engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: []byte(`"sunny"`)}}})
		}), outcome: "ok"},
		{name: "a tool.error is an answer", handler: verified(func(w http.ResponseWriter, r *http.Request, req engine.DecideRequest) {
			answer(w, engine.Decision{Actions: []engine.Action{engine.ToolError{Error: "no such city", Code: "not_found"}}})
		}), outcome: "ok"},
		{name: "down", outcome: "unreachable"},
		{name: "500", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
		}, outcome: "http_error"},
		{name: "not a decision", handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "It's sunny!")
		}, outcome: "bad_answer"},
		{name: "slow", handler: func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			<-r.Context().Done()
		}, outcome: "timeout"},
		{name: "ended by the engine", handler: func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			<-r.Context().Done()
		}, cancel: true, outcome: "cancelled"},
		{name: "ended by its attempt's timeout", handler: func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			<-r.Context().Done()
		}, cancel: true, cause: engine.ErrAttemptTimedOut, outcome: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := "http://" + closedAddr(t)
			if tt.handler != nil {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				url = srv.URL
			}
			m := metrics.New()
			w := newWorker(t, url, Options{Metrics: m})
			ctx, stop := context.WithCancelCause(context.Background())
			defer stop(nil)
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			if tt.cancel {
				go func() {
					time.Sleep(50 * time.Millisecond)
					stop(tt.cause)
				}()
			}
			if _, err := w.Decide(ctx, engine.DecideRequest{Session: "s1", Trigger: execTrigger(time.Now().Add(time.Minute))}); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			wantRequests(t, m, fmt.Sprintf(`gateway_worker_requests_total{outcome=%q,trigger="tool.execute"} 1`, tt.outcome))
			if n := testutil.CollectAndCount(m.Registry(), "gateway_worker_request_seconds"); n != 1 {
				t.Errorf("%d series of gateway_worker_request_seconds, want 1", n)
			}
		})
	}
}

// wantRequests fails t unless gateway_worker_requests_total holds exactly
// the series lines, one a line.
func wantRequests(t *testing.T, m *metrics.Metrics, lines ...string) {
	t.Helper()
	want := `
# HELP gateway_worker_requests_total Requests to the HTTP worker, by trigger and outcome (ok, unreachable, timeout, no_slot, http_error, bad_answer, cancelled, failed).
# TYPE gateway_worker_requests_total counter
` + strings.Join(lines, "\n") + "\n"
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gateway_worker_requests_total"); err != nil {
		t.Error(err)
	}
}
