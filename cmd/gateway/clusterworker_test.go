package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model/scripted"
	"github.com/clienttools/gateway/httpworker"
)

// clusterWorker is the cluster test's worker over HTTP, as a team would run
// one beside its gateways: it gives sessions the demo page's browser tools
// and two tools of its own, lookup_order (idempotent) and send_email (not),
// whose runs it holds until the test lets them answer, and counts.
type clusterWorker struct {
	url    string
	secret string

	mu      sync.Mutex
	runs    map[string]int // "session call" -> tool.execute requests
	arrived chan string    // each tool.execute, as "session call"
	release chan struct{}  // closed: held runs answer, new ones at once
}

// The messages that make the test's script call a worker tool beside the
// confirm, and the sentences after them.
const (
	askEmail    = "delete my draft and email the team"
	askLookup   = "delete my draft and look up my order"
	emailSent   = "The email is sent."
	emailUnsure = "The email may not have gone."
	orderSeen   = "Order 42 has shipped."
)

func newClusterWorker(t *testing.T) *clusterWorker {
	t.Helper()
	w := &clusterWorker{
		secret:  "cluster-test-secret-of-at-least-32-bytes",
		runs:    map[string]int{},
		arrived: make(chan string, 1000),
		release: make(chan struct{}),
	}
	yes := true
	agent := engine.AgentConfig{Model: "scripted", Stream: true, Tools: append(append([]engine.AgentTool{}, demo.ClientTools...),
		engine.AgentTool{Name: "lookup_order", Description: "Look up the user's order.", Idempotent: &yes},
		engine.AgentTool{Name: "send_email", Description: "Email the user's team."},
	)}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		req, err := readDecideRequest(r, w.secret)
		if err != nil {
			http.Error(rw, `{"error":"`+err.Error()+`"}`, http.StatusBadRequest)
			return
		}
		var d engine.Decision
		switch tr := req.Trigger.(type) {
		case engine.SessionStart:
			d.Agent = &agent
		case engine.ToolExecute:
			key := req.Session + " " + tr.ID
			w.mu.Lock()
			w.runs[key]++
			w.mu.Unlock()
			w.arrived <- key
			select {
			case <-w.release:
			case <-r.Context().Done():
				return // its gateway is gone
			}
			d.Actions = []engine.Action{engine.ToolResult{Result: json.RawMessage(`"done"`)}}
		default:
			d = req.Proposed
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(d)
	}))
	t.Cleanup(func() {
		w.letGo()
		srv.Close()
	})
	w.url = srv.URL + "/"
	return w
}

// letGo answers the held runs, and every later one at once.
func (w *clusterWorker) letGo() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

// runsOf is how many times the worker was asked to run a session's call.
func (w *clusterWorker) runsOf(session, call string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runs[session+" "+call]
}

// flags are a gateway's flags to use this worker and the test's script.
func (w *clusterWorker) flags(t *testing.T) []string {
	t.Helper()
	script := scripted.Demo()
	script.Rules = append([]scripted.Rule{
		{Match: "(?i)^" + askEmail + "$", Say: "I'll ask you first, and email them.", Tools: []scripted.ToolCall{
			{Name: "confirm", Arguments: scripted.Arguments(`{"question": "Delete your draft?"}`)}, {Name: "send_email"}}},
		{Match: "(?i)^" + askLookup + "$", Say: "I'll ask you first, and look it up.", Tools: []scripted.ToolCall{
			{Name: "confirm", Arguments: scripted.Arguments(`{"question": "Delete your draft?"}`)}, {Name: "lookup_order"}}},
	}, script.Rules...)
	script.AfterTool = append(script.AfterTool,
		scripted.AfterTool{Tool: "send_email", OK: emailSent, Error: emailUnsure},
		scripted.AfterTool{Tool: "lookup_order", OK: orderSeen, Error: "I could not look it up."},
	)
	data, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--worker-url", w.url, "--worker-secret", w.secret, "--script", path}
}

// readDecideRequest reads a worker request the gateway signed with secret.
func readDecideRequest(r *http.Request, secret string) (engine.DecideRequest, error) {
	var req engine.DecideRequest
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = httpworker.Verify([]byte(secret), r, body, time.Now(), 0)
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	return req, err
}
