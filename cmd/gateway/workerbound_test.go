package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	var executes atomic.Int32
	addr, client, ws := workerChat(t, "two cities", func(rw http.ResponseWriter, r *http.Request, _ engine.ToolExecute) {
		executes.Add(1)
		<-r.Context().Done() // held until its attempt times out
	}, "--worker-max-in-flight", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	codes := map[string]int{}
	for _, f := range settled(ctx, t, ws, 2) {
		codes[f.Code]++
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

// TestWorkerMaxResponse: --worker-max-response bounds what a worker's
// answer may add to its request: a result past it fails the call, saying
// so, and one within it is taken. The bound was fixed at 4 MiB in the
// binary.
func TestWorkerMaxResponse(t *testing.T) {
	_, _, ws := workerChat(t, "two cities", func(rw http.ResponseWriter, r *http.Request, x engine.ToolExecute) {
		size := 1000 // Tokyo's fits in the 2000 bytes the answer may add
		if string(x.Input.Value) == `{"city":"Paris"}` {
			size = 4000
		}
		result, _ := json.Marshal(strings.Repeat("x", size))
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(engine.Decision{Actions: []engine.Action{engine.ToolResult{Result: result}}})
	}, "--worker-max-response", "2000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	var ok, failed int
	for _, f := range settled(ctx, t, ws, 2) {
		switch {
		case f.OK && len(f.Result) == 1000:
			ok++
		case !f.OK && strings.Contains(f.Error, "with a body larger than") && strings.Contains(f.Error, "the 2000 bytes more an answer may hold"):
			failed++
		default:
			t.Errorf("a call settled ok %v, %d bytes of result, error %q", f.OK, len(f.Result), f.Error)
		}
	}
	if ok != 1 || failed != 1 {
		t.Errorf("calls taken %d and failed for their size %d; want 1 and 1", ok, failed)
	}
}

const workerChatSecret = "worker-bound-test-secret-of-32-bytes"

// workerChat starts the binary with an HTTP worker whose agent has one
// tool, get_weather, run by execute, with the flags given, on a script
// whose message asks for two calls at once; and a page that sends message.
func workerChat(t *testing.T, message string, execute func(http.ResponseWriter, *http.Request, engine.ToolExecute), flags ...string) (addr string, client *http.Client, ws *websocket.Conn) {
	t.Helper()
	agent := engine.AgentConfig{Model: "scripted", Tools: []engine.AgentTool{{
		Name:  "get_weather",
		Input: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		Retry: &engine.RetryPolicy{Timeout: "400ms"},
	}}}
	worker := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, err := readDecideRequest(r, workerChatSecret)
		if err != nil {
			http.Error(rw, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		d := req.Proposed
		switch x := req.Trigger.(type) {
		case engine.SessionStart:
			d = engine.Decision{Agent: &agent}
		case engine.ToolExecute:
			execute(rw, r, x)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(d)
	}))
	t.Cleanup(worker.Close)
	script, err := json.Marshal(scripted.Script{Rules: []scripted.Rule{{
		Match: "^" + message + "$", Say: "Checking both.",
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
	addr, _ = startGateway(t, append([]string{"--store", "memory", "--script", scriptPath,
		"--worker-url", worker.URL + "/", "--worker-secret", workerChatSecret}, flags...), nil)

	jar, _ := cookiejar.New(nil)
	client = &http.Client{Jar: jar, Timeout: hang}
	ctx, cancel := context.WithTimeout(context.Background(), 3*hang)
	defer cancel()
	ws, _, err = websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	for _, f := range []string{`{"type":"session.open"}`, `{"type":"message","content":` + strconv.Quote(message) + `}`} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
			t.Fatal(err)
		}
	}
	return addr, client, ws
}

// settledCall is a tool.finished frame's outcome.
type settledCall struct {
	OK     bool
	Code   string
	Result string
	Error  string
}

// settled reads ws until n calls have settled, and returns their outcomes.
func settled(ctx context.Context, t *testing.T, ws *websocket.Conn, n int) []settledCall {
	t.Helper()
	var calls []settledCall
	for len(calls) < n {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (settled %d of %d)", err, len(calls), n)
		}
		var f struct {
			Type string
			settledCall
		}
		_ = json.Unmarshal(b, &f)
		if f.Type == "tool.finished" {
			calls = append(calls, f.settledCall)
		}
	}
	return calls
}
