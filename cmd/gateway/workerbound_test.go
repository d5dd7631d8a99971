package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/coder/websocket"
)

// TestWorkerMaxInFlight: --worker-max-in-flight bounds the requests open to
// the HTTP worker, and a request whose time runs out waiting for a slot
// never reaches the worker and counts as no_slot, so an operator tells a
// bound set too low from a worker too slow. The model asks for two worker
// calls at once; with a bound of 1 the worker, which holds what it gets,
// sees one of them.
func TestWorkerMaxInFlight(t *testing.T) {
	const secret = "worker-bound-test-secret-of-32-bytes"
	agent := engine.AgentConfig{Model: "scripted", Tools: []engine.AgentTool{{
		Name:  "get_weather",
		Input: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Retry: &engine.RetryPolicy{Timeout: "400ms"},
	}}}
	var executes atomic.Int32
	worker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, err := readDecideRequest(r, secret)
		if err != nil {
			http.Error(rw, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		d := req.Proposed
		switch req.Trigger.(type) {
		case engine.SessionStart:
			d = engine.Decision{Agent: &agent}
		case engine.ToolExecute:
			executes.Add(1)
			<-r.Context().Done() // held until its attempt times out
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(d)
	}))
	t.Cleanup(worker.Close)
	script, err := json.Marshal(scripted.Script{Rules: []scripted.Rule{{
		Match: "^two cities$", Say: "Checking both.",
		Tools: []scripted.ToolCall{
			{Name: "get_weather", Arguments: scripted.Arguments(`{"city":"Tokyo"}`)},
			{Name: "get_weather", Arguments: scripted.Arguments(`{"city":"Paris"}`)},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(scriptPath, script, 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startGateway(t, []string{"--store", "memory", "--script", scriptPath,
		"--worker-url", worker.URL + "/", "--worker-secret", secret, "--worker-max-in-flight", "1"}, nil)

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: hang}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, f := range []string{`{"type":"session.open"}`, `{"type":"message","content":"two cities"}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	codes := map[string]int{}
	for settled := 0; settled < 2; {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (settled %d of 2)", err, settled)
		}
		var f struct {
			Type string
			OK   bool
			Code string
		}
		_ = json.Unmarshal(b, &f)
		if f.Type == "tool.finished" {
			settled++
			codes[f.Code]++
		}
	}
	// Both attempts timed out: the one the worker held, and the one that
	// waited for its slot.
	if codes["timeout"] != 2 {
		t.Errorf("the calls settled with codes %v, want timeout twice", codes)
	}
	if n := executes.Load(); n != 1 {
		t.Errorf("the worker got %d tool.execute requests, want 1: the bound is 1", n)
	}
	// Counted as each request returns, which may be after its call
	// settled on the engine's clock.
	count := func(outcome string) float64 {
		return sampleValue(scrape(t, client, "http://"+addr), "gateway_worker_requests_total", map[string]string{"trigger": "tool.execute", "outcome": outcome})
	}
	for deadline := time.Now().Add(hang); count("timeout") != 1 || count("no_slot") != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gateway_worker_requests_total for tool.execute: timeout %v, no_slot %v; want 1 and 1", count("timeout"), count("no_slot"))
		}
	}
}
