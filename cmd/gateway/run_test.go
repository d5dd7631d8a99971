package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/testlog"
	"github.com/coder/websocket"
)

// hang bounds every wait: a guard against hangs, not a timing assertion.
const hang = 10 * time.Second

var listening = regexp.MustCompile(`gateway listening: open http://(\S+)/`)

// startGateway runs the command on a free port. It returns the address it
// printed, and stop, which cancels run's context and returns run's error
// (stop is also a cleanup, which fails the test unless run returns nil).
func startGateway(t *testing.T, args []string, env map[string]string) (addr string, stop func() error) {
	t.Helper()
	addr, stop, _ = startGatewayLogs(t, args, env)
	return addr, stop
}

// startGatewayLogs is startGateway, and what the gateway logs.
func startGatewayLogs(t *testing.T, args []string, env map[string]string) (addr string, stop func() error, stderr *testlog.Buffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdoutR, stdoutW := io.Pipe()
	stderr = &testlog.Buffer{}
	done := make(chan error, 1)
	go func() {
		// Each gateway has a data directory of its own, unless args say
		// (--store memory refuses one).
		base := []string{"--listen", "127.0.0.1:0"}
		if !slices.Contains(args, "memory") {
			base = append(base, "--data-dir", t.TempDir())
		}
		err := run(ctx, append(base, args...), func(k string) string { return env[k] }, stdoutW, stderr)
		stdoutW.Close()
		done <- err
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(hang):
				runErr = errors.New("run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdoutR)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdoutR)
	}()
	select {
	case line := <-lines:
		m := listening.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("stdout's first line is %q, want %q (run: %v)", line, listening, stop())
		}
		return m[1], stop, stderr
	case <-time.After(hang):
		t.Fatal("the gateway printed no URL")
		return "", nil, nil
	}
}

// browserClient is a browser's HTTP client: a cookie jar, and a transport
// of its own, closed with the test. It has no timeout: a WebSocket dial
// takes it too.
func browserClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: transport}
}

func TestRunServesAndShutsDown(t *testing.T) {
	addr, stop := startGateway(t, nil, nil)
	base := "http://" + addr
	browser := browserClient(t)
	client := &http.Client{Jar: browser.Jar, Transport: browser.Transport, Timeout: hang}

	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html", "/static/demo.js"},
		{"/healthz", "application/json", `"status":"ok"`},
		{"/static/gateway.js", "javascript", "session.open"},
	} {
		resp, err := client.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tc.contentType) || !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s = %s %q (%d bytes); want 200, %s, containing %q", tc.path, resp.Status, resp.Header.Get("Content-Type"), len(body), tc.contentType, tc.contains)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPClient: browser})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	type frame struct {
		Type    string          `json:"type"`
		Seq     int64           `json:"seq"`
		Session string          `json:"session"`
		ID      string          `json:"id"`
		Attempt int             `json:"attempt"`
		Message json.RawMessage `json:"message"`
	}
	read := func() (frame, []byte) {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		return f, b
	}
	// converse sends a message and returns the assistant's messages up to
	// the session.idle after it; onCall answers client calls.
	converse := func(content string, onCall func(f frame)) []string {
		send(map[string]any{"type": "message", "content": content})
		var said []string
		seen := false
		for {
			f, raw := read()
			var m struct{ Role, Content string }
			_ = json.Unmarshal(f.Message, &m)
			switch {
			case f.Type == "message" && m.Role == "user" && m.Content == content:
				seen = true
			case seen && f.Type == "message" && m.Role == "assistant" && m.Content != "":
				said = append(said, m.Content)
			case f.Type == "tool.call":
				if onCall == nil {
					t.Fatalf("unexpected %s", raw)
				}
				onCall(f)
			case seen && f.Type == "session.idle":
				return said
			case f.Type == "error":
				t.Fatalf("error: %s", raw)
			}
		}
	}

	send(map[string]any{"type": "session.open", "tools": []string{"get_local_time", "set_theme", "confirm"}})
	if f, raw := read(); f.Type != "session.opened" || f.Session == "" {
		t.Fatalf("first frame %s, want session.opened", raw)
	}
	said := converse("what's the weather in Tokyo", nil)
	if got := strings.Join(said, " "); !strings.Contains(got, "It's clear in Tokyo.") {
		t.Errorf("the model said %q, want it to mention %q", said, "It's clear in Tokyo.")
	}
	said = converse("what time is it", func(f frame) {
		send(map[string]any{"type": "tool.result", "id": f.ID, "attempt": f.Attempt, "result": map[string]string{"time": "12:00", "timeZone": "Asia/Tokyo"}})
	})
	if got := strings.Join(said, " "); !strings.Contains(got, "12:00") {
		t.Errorf("the model said %q, want it to mention the page's time", said)
	}

	// Cancelling run's context closes the socket with 1001, and run
	// returns nil.
	closed := make(chan websocket.StatusCode, 1)
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				closed <- websocket.CloseStatus(err)
				return
			}
		}
	}()
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	select {
	case code := <-closed:
		if code != websocket.StatusGoingAway {
			t.Errorf("close status on shutdown = %v, want %v", code, websocket.StatusGoingAway)
		}
	case <-time.After(hang):
		t.Error("the socket was not closed on shutdown")
	}
}

// TestRunRefusesAForeignDataDir: a data directory that holds something
// else stops the start, with a message that says what to do, and nothing in
// it is touched.
func TestRunRefusesAForeignDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "thesis.tex"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is not a gateway data directory") || !strings.Contains(err.Error(), "Give --data-dir an empty or new directory") {
		t.Errorf("run with a foreign data dir: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the foreign directory has %d entries now", len(entries))
	}
}

// TestRunStoppedWhileStarting: a signal during the start (Ctrl-C on a slow
// start, an orchestrator stopping a starting pod) is a stop, not damage:
// run says the data is intact, with no advice to move it aside, and the
// next start opens the same directory.
func TestRunStoppedWhileStarting(t *testing.T) {
	dir := t.TempDir()
	_, stop := startGateway(t, []string{"--data-dir", dir}, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal, as soon as it starts
	err := run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, func(string) string { return "" }, io.Discard, io.Discard)
	if !errors.Is(err, errInterrupted) || strings.Contains(err.Error(), "move it aside") {
		t.Errorf("run stopped while starting: %v, want errInterrupted", err)
	}
	_, stop = startGateway(t, []string{"--data-dir", dir}, nil)
	if err := stop(); err != nil {
		t.Errorf("the start after: %v", err)
	}
}

// TestIdentityLivesAsLongAsTheChats: a browser's identity cookie lives
// --retain after its last visit, as its chats are kept --retain after
// their last message: one that comes back finds what the store still has.
func TestIdentityLivesAsLongAsTheChats(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		maxAge int
	}{{nil, 30 * 24 * 3600}, {[]string{"--retain", "48h"}, 48 * 3600}} {
		addr, stop := startGateway(t, append([]string{"--store", "memory"}, tc.args...), nil)
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var got *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "gateway_session" {
				got = c
			}
		}
		if got == nil || got.MaxAge != tc.maxAge {
			t.Errorf("%v: the identity cookie %v, want Max-Age %d", tc.args, got, tc.maxAge)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShutdownEndsAChatStream: an AI SDK response still streaming when the
// gateway stops ends with the shutdown, and run returns nil at once: the
// HTTP server's own shutdown waits for open requests, and must not spend
// the engine's grace (its drain, the sessions' unload, their leases given
// back) on a stream only the gateway can end.
func TestShutdownEndsAChatStream(t *testing.T) {
	script := filepath.Join(t.TempDir(), "slow.json")
	slow := `{"rules": [{"match": "(?i)tell me a long story", "say": "` + strings.Repeat("once upon a time ", 100) + `", "chunkWords": 1, "delay": "200ms"}]}`
	if err := os.WriteFile(script, []byte(slow), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, stop := startGateway(t, []string{"--script", script, "--drain", "0s"}, nil)
	client := browserClient(t)
	page, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()

	body := `{"id": "story", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "tell me a long story"}]}]}`
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /api/chat = %s: %s", resp.Status, b)
	}
	// Read until the reply streams, then stop the gateway mid-story.
	chunks := bufio.NewScanner(resp.Body)
	for chunks.Scan() && !strings.Contains(chunks.Text(), `"text-delta"`) {
	}
	ended := make(chan error, 1)
	go func() {
		for chunks.Scan() {
		}
		ended <- chunks.Err()
	}()
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	select {
	case <-ended:
	case <-time.After(hang):
		t.Error("the response was still open after run returned")
	}
}

// TestStoreCloseIsBounded: a store whose close hangs (an embedded server
// stuck on damaged or shared files) does not keep the process from
// exiting: the wait ends after its grace, with an error logged.
func TestStoreCloseIsBounded(t *testing.T) {
	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	release := make(chan struct{})
	defer close(release)
	done := make(chan struct{})
	go func() {
		closeWithin(50*time.Millisecond, func() error { <-release; return nil }, logger)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("closeWithin waited for a close that hangs")
	}
	if !strings.Contains(logs.String(), "did not close in time") {
		t.Errorf("no error logged: %s", logs.String())
	}
}
