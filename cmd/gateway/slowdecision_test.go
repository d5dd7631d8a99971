package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/demo"
	"github.com/clienttools/gateway/engine"
)

// TestMessageTakenBeforeASlowDecisionOutlivesAKill: a worker that takes its
// time over a message (a moderation check) does not hold the page's
// message.taken: the gateway stores the message first and answers. A page
// told so need not send the message again, so the message must survive
// the process's death while the worker decides: the gateway killed with
// SIGKILL then, the next one on the same data asks the worker again and
// the chat goes on, the message in it once, sent once.
func TestMessageTakenBeforeASlowDecisionOutlivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it: not in -short")
	}
	bin := buildGatewayBinary(t)
	const secret = "slow-decision-test-secret-of-32-bytes"
	var hold atomic.Bool // the worker holds message decisions until its request ends
	hold.Store(true)
	var asked atomic.Int32
	held := make(chan struct{}, 4)
	agent := engine.AgentConfig{Model: "scripted", Stream: true, Tools: demo.ClientTools}
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
		case engine.UserMessage:
			asked.Add(1)
			if hold.Load() {
				held <- struct{}{}
				<-r.Context().Done() // until its gateway dies
				return
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(d)
	}))
	t.Cleanup(worker.Close)

	dir := t.TempDir()
	addr := durableFreeAddr(t)
	base := "http://" + addr
	flags := []string{"--worker-url", worker.URL + "/", "--worker-secret", secret}
	g1 := startGatewayProc(t, "gateway 1", bin, addr, dir, flags...)
	g1.waitHealthy(base)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	b := &durableBrowser{http: &http.Client{Jar: jar, Transport: transport, Timeout: hang}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*hang)
	defer cancel()
	page, err := b.dial(ctx, base, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := page.send(ctx, map[string]any{"type": "session.open", "tools": durableTools}); err != nil {
		t.Fatal(err)
	}
	opened, err := page.until("session.opened", func(f wireFrame) bool { return f.Type == "session.opened" })
	if err != nil {
		t.Fatal(err)
	}
	b.session = opened.f.Session
	sent := time.Now()
	if err := page.send(ctx, map[string]any{"type": "message", "id": "m1", "content": "hello"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(hang):
		t.Fatal("the worker was not asked about the message")
	}
	// The SDK's answerTimeout is 15 s: the answer comes well before.
	if _, err := page.until("message.taken while the worker decides", func(f wireFrame) bool {
		return f.Type == "message.taken" && f.ID == "m1"
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("message.taken %v after the message, the worker still deciding", time.Since(sent).Round(time.Millisecond))
	for _, r := range b.seen() {
		if r.f.Type == "message" {
			t.Fatalf("a message event before the worker decided: %s\n%s", r.raw, b.dump())
		}
		if r.f.numbered() {
			b.after = *r.f.Seq
		}
	}

	if err := g1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = g1.wait()
	if err := page.closed(); err == nil {
		t.Fatal("the page's socket ended without an error")
	}

	hold.Store(false)
	g2 := startGatewayProc(t, "gateway 2", bin, addr, dir, flags...)
	g2.waitHealthy(base)
	page2, err := b.dial(ctx, base, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := page2.send(ctx, map[string]any{"type": "session.open", "session": b.session, "after": b.after, "tools": durableTools}); err != nil {
		t.Fatal(err)
	}
	if err := page2.untilReplyIdle(helloReply); err != nil {
		t.Fatalf("%v\nframes:\n%s", err, b.dump())
	}
	users := 0
	for _, r := range b.seen() {
		if role, content := r.f.chat(); r.f.Type == "message" && role == "user" {
			users++
			if content != "hello" {
				t.Errorf("user message %q, want hello", content)
			}
		}
	}
	if users != 1 {
		t.Errorf("the user's message came %d times, want once\n%s", users, b.dump())
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("the worker was asked about the message %d times, want twice: before the kill, and by the next gateway", n)
	}
	// The binary counts its worker's requests (operations.md): the next
	// gateway asked about the message once, and had its answer.
	families := scrape(t, b.http, base)
	if got := sampleValue(families, "gateway_worker_requests_total", map[string]string{"trigger": "message", "outcome": "ok"}); got != 1 {
		t.Errorf("gateway_worker_requests_total{trigger=message,outcome=ok} = %v, want 1", got)
	}
}

// seen is a copy of every frame the browser's pages read so far.
func (b *durableBrowser) seen() []recFrame {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]recFrame(nil), b.frames...)
}
