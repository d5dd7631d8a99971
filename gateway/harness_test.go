package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/gateway"
	"github.com/coder/websocket"
)

// hang bounds every wait of these tests. It guards against hangs; no test
// asserts how long anything took.
const hang = 10 * time.Second

// Flood sizes: enough bytes to fill the small socket buffers of the
// slow-page tests many times over.
const (
	floodDeltas = 100
	floodDelta  = 1024
)

// newTestModel returns a model that answers by the last message of the
// transcript:
//
//	user "time"          calls get_local_time (client)
//	user "both"          calls get_weather (worker), then get_local_time (client), in one turn
//	user "both reversed" the same two calls, the client's first
//	user "flaky"         calls flaky (client: 2 attempts of 5s, no backoff)
//	user "once"          calls once (client: 1 attempt of 5s)
//	user "flood"         streams floodDeltas deltas of floodDelta bytes
//	user "gated flood"   streams floodDeltas deltas, waits for gate to close, then 3×floodDeltas more
//	other user text      says "echo: <text>"
//	tool messages        says "got: <content>; <content>" of the trailing tool messages, in order
//
// Call ids are fixed ("call_time", ...), so two sessions use the same ids.
func newTestModel(gate <-chan struct{}) model.Model {
	return model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		say := func(text string) (model.Response, error) {
			onDelta(text)
			return model.Response{Text: text, StopReason: model.StopEndTurn}, nil
		}
		call := func(uses ...model.ToolUse) (model.Response, error) {
			return model.Response{ToolUses: uses, StopReason: model.StopToolUse}, nil
		}
		flood := func(n int) {
			chunk := strings.Repeat("x", floodDelta)
			for range n {
				onDelta(chunk)
			}
		}
		timeUse := model.ToolUse{ID: "call_time", Name: "get_local_time", Arguments: `{}`}
		weatherUse := model.ToolUse{ID: "call_weather", Name: "get_weather", Arguments: `{"city":"Tokyo"}`}
		last := req.Messages[len(req.Messages)-1]
		if last.Role == model.RoleTool {
			var got []string
			for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role == model.RoleTool; i-- {
				got = append(got, req.Messages[i].Content)
			}
			slices.Reverse(got)
			return say("got: " + strings.Join(got, "; "))
		}
		switch last.Content {
		case "time":
			return call(timeUse)
		case "bad time": // arguments that are not JSON: the engine answers with proposed
			return call(model.ToolUse{ID: "call_bad_time", Name: "get_local_time", Arguments: `{"tz":`})
		case "both":
			return call(weatherUse, timeUse)
		case "both reversed":
			return call(timeUse, weatherUse)
		case "flaky":
			return call(model.ToolUse{ID: "call_flaky", Name: "flaky", Arguments: `{}`})
		case "once":
			return call(model.ToolUse{ID: "call_once", Name: "once", Arguments: `{}`})
		case "once where":
			return call(model.ToolUse{ID: "call_once_where", Name: "once", Arguments: `{"where":"here"}`})
		case "pay":
			return call(model.ToolUse{ID: "call_pay", Name: "pay", Arguments: `{}`})
		case "delete":
			return call(model.ToolUse{ID: "call_delete", Name: "delete_file", Arguments: `{"path":"notes.txt"}`})
		case "flood":
			flood(floodDeltas)
			return model.Response{Text: "flooded", StopReason: model.StopEndTurn}, nil
		case "gated flood":
			flood(floodDeltas)
			select {
			case <-gate:
			case <-ctx.Done():
				return model.Response{}, ctx.Err()
			}
			flood(3 * floodDeltas)
			return model.Response{Text: "flooded", StopReason: model.StopEndTurn}, nil
		default:
			return say("echo: " + strings.TrimSpace(last.Content))
		}
	})
}

// testWorker declares the client tools the test pages run and get_weather,
// a worker tool in Go.
func testWorker() *engine.ToolWorker {
	return &engine.ToolWorker{
		Agent: engine.AgentConfig{
			Model:  "test",
			Stream: true,
			Tools: []engine.AgentTool{
				{
					Name:    "get_local_time",
					Input:   engine.Schema(`{"type": "object"}`),
					Output:  engine.Schema(`{"type": "object", "required": ["time"]}`),
					Handler: engine.HandlerClient,
				},
				{
					Name:    "flaky",
					Handler: engine.HandlerClient,
					Retry:   &engine.RetryPolicy{Attempts: 2, Timeout: "5s", Backoff: "0s"},
				},
				{
					Name:    "once",
					Handler: engine.HandlerClient,
					Retry:   &engine.RetryPolicy{Attempts: 1, Timeout: "5s"},
				},
				{
					Name:       "pay",
					Handler:    engine.HandlerClient,
					Idempotent: new(false),
				},
			},
		},
		Tools: []engine.Tool{{
			Name:     "delete_file", // asks the user first, through a page (/ws)
			Approval: engine.ApprovalAlways,
			Retry:    &engine.RetryPolicy{Timeout: "5s"},
			Exec:     func(context.Context, json.RawMessage) (any, error) { return "deleted", nil },
		}, {
			Name:  "get_weather",
			Input: engine.Schema(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
			Exec: func(ctx context.Context, args json.RawMessage) (any, error) {
				var in struct{ City string }
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, err
				}
				return fmt.Sprintf("It's clear in %s.", in.City), nil
			},
		}},
	}
}

// pageTools are the client tools a test page declares.
var pageTools = []string{"get_local_time", "flaky", "once"}

// harness is a gateway on an httptest server, with its engine.
type harness struct {
	t     *testing.T
	eng   *engine.Engine
	gw    *gateway.Server
	srv   *httptest.Server
	clock *clock.Fake // nil unless harnessOptions.fakeClock
	logs  *logSink
	// gate holds the "gated flood" halfway; close it to go on.
	gate chan struct{}
}

type harnessOptions struct {
	// gateway's Engine and Logger are filled in; other fields are passed
	// on (PingInterval -1 unless set).
	gateway gateway.Options
	// engine's Worker, Models, Logger and Clock are filled in; other
	// fields are passed on.
	engine    engine.Options
	fakeClock bool
	// worker wraps the test worker (testWorker); nil: it alone.
	worker func(engine.Worker) engine.Worker
	// listener wraps the server's listener.
	listener func(net.Listener) net.Listener
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, logs: newLogSink(), gate: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", h.logs.String())
		}
	})
	logger := slog.New(h.logs)
	eo := o.engine
	eo.Worker = testWorker()
	if o.worker != nil {
		eo.Worker = o.worker(eo.Worker)
	}
	eo.Models = model.ResolverFunc(func(id string) (model.Model, error) { return newTestModel(h.gate), nil })
	eo.Logger = logger
	if o.fakeClock {
		h.clock = clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		eo.Clock = h.clock
	}
	eng, err := engine.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	h.eng = eng
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		if err := eng.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	gopts := o.gateway
	gopts.Engine, gopts.Logger = eng, logger
	if gopts.PingInterval == 0 {
		gopts.PingInterval = -1
	}
	h.gw, err = gateway.New(gopts)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewUnstartedServer(h.gw.Handler())
	if o.listener != nil {
		h.srv.Listener = o.listener(h.srv.Listener)
	}
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() {
		// Sockets are hijacked: httptest's Close does not wait for them.
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		if err := h.gw.Shutdown(ctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	return h
}

// getWithCookie GETs path with cookie (nil: none), as a browser with no
// jar; its body is read and closed.
func (h *harness) getWithCookie(path string, cookie *http.Cookie) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+path, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func (h *harness) wsURL() string { return "ws" + strings.TrimPrefix(h.srv.URL, "http") + "/ws" }

// session returns an open engine session.
func (h *harness) session(id string) *engine.Session {
	h.t.Helper()
	s, ok := h.eng.Session(id)
	if !ok {
		h.t.Fatalf("no engine session %q", id)
	}
	return s
}

func (h *harness) transcript(id string) []engine.Message {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	tr, err := h.session(id).Transcript(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return tr
}

// browser is one browser: a cookie jar and its own HTTP transport.
type browser struct {
	h      *harness
	client *http.Client
}

// newBrowser returns a browser that has loaded the page, so it has its
// cookie. transport may be nil.
func (h *harness) newBrowser(transport *http.Transport) *browser {
	h.t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if transport == nil {
		transport = &http.Transport{}
	}
	h.t.Cleanup(transport.CloseIdleConnections)
	b := &browser{h: h, client: &http.Client{Jar: jar, Transport: transport}}
	resp, err := b.client.Get(h.srv.URL + "/")
	if err != nil {
		h.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET / = %s", resp.Status)
	}
	return b
}

// withTransport returns the same browser (its cookies) on another
// transport.
func (b *browser) withTransport(transport *http.Transport) *browser {
	b.h.t.Cleanup(transport.CloseIdleConnections)
	return &browser{h: b.h, client: &http.Client{Jar: b.client.Jar, Transport: transport}}
}

// dial opens a WebSocket with the browser's cookies.
func (b *browser) dial(header http.Header) *wsClient {
	b.h.t.Helper()
	c, _, err := b.dialErr(header)
	if err != nil {
		b.h.t.Fatalf("dial: %v", err)
	}
	return c
}

func (b *browser) dialErr(header http.Header) (*wsClient, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, b.h.wsURL(), &websocket.DialOptions{HTTPClient: b.client, HTTPHeader: header})
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(64 << 20)
	c := &wsClient{t: b.h.t, ws: ws}
	b.h.t.Cleanup(func() { _ = ws.CloseNow() })
	return c, resp, nil
}

// open dials and opens a new session declaring tools; it returns the
// session id.
func (b *browser) open(tools []string) (*wsClient, string) {
	b.h.t.Helper()
	c := b.dial(nil)
	c.send(map[string]any{"type": "session.open", "tools": tools})
	opened := c.untilType("session.opened")
	if opened.Session == "" {
		b.h.t.Fatalf("session.opened without a session: %s", opened.raw)
	}
	return c, opened.Session
}

// frame is any frame the gateway sends, decoded loosely.
type frame struct {
	Type     string          `json:"type"`
	Seq      int64           `json:"seq"`
	Session  string          `json:"session"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Attempt  int             `json:"attempt"`
	Attempts int             `json:"attempts"`
	Deadline string          `json:"deadline"`
	Input    json.RawMessage `json:"input"`
	Code     string          `json:"code"`
	Message  json.RawMessage `json:"message"` // a string on error frames, an object on message events
	Text     string          `json:"text"`
	OK       bool            `json:"ok"`
	Result   string          `json:"result"`
	Error    string          `json:"error"`
	Page     string          `json:"page"`
	Epoch    string          `json:"epoch"`
	raw      []byte
}

// errorText is the message of an error frame.
func (f frame) errorText() string {
	var s string
	_ = json.Unmarshal(f.Message, &s)
	return s
}

// transcriptMessage is the message of a message event.
func (f frame) transcriptMessage() engine.Message {
	var m engine.Message
	_ = json.Unmarshal(f.Message, &m)
	return m
}

func (f frame) String() string { return string(f.raw) }

// wsClient is a test's side of one WebSocket. Only the test goroutine
// uses it.
type wsClient struct {
	t      *testing.T
	ws     *websocket.Conn
	frames []frame // every frame read, in order
	// userSeq is the seq of the latest user message event read: the
	// session.idle that answers it comes after it.
	userSeq int64
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(websocket.MessageText, b)
}

func (c *wsClient) sendRaw(typ websocket.MessageType, b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := c.ws.Write(ctx, typ, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read reads one frame; the error is the connection's end.
func (c *wsClient) read() (frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	typ, b, err := c.ws.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	if typ != websocket.MessageText {
		return frame{}, fmt.Errorf("got a %v frame", typ)
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		return frame{}, fmt.Errorf("frame %s is not JSON: %v", b, err)
	}
	f.raw = b
	c.frames = append(c.frames, f)
	if f.Type == "message" && f.transcriptMessage().Role == model.RoleUser {
		c.userSeq = f.Seq
	}
	return f, nil
}

// until reads frames until one satisfies ok, and returns it.
func (c *wsClient) until(what string, ok func(frame) bool) frame {
	c.t.Helper()
	for {
		f, err := c.read()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v (read so far: %v)", what, err, c.frames)
		}
		if ok(f) {
			return f
		}
	}
}

// seen returns the first frame read so far that satisfies ok, or reads
// until one does.
func (c *wsClient) seen(what string, ok func(frame) bool) frame {
	c.t.Helper()
	for _, f := range c.frames {
		if ok(f) {
			return f
		}
	}
	return c.until(what, ok)
}

func (c *wsClient) untilType(typ string) frame {
	c.t.Helper()
	return c.until(typ, func(f frame) bool { return f.Type == typ })
}

// untilError reads until an error frame without seq (the gateway refused
// a frame) and returns it.
func (c *wsClient) untilError() frame {
	c.t.Helper()
	return c.until("an error frame", func(f frame) bool { return f.Type == "error" && f.Seq == 0 })
}

// untilCall reads until the tool.call for id.
func (c *wsClient) untilCall(id string) frame {
	c.t.Helper()
	return c.until("tool.call "+id, func(f frame) bool { return f.Type == "tool.call" && f.ID == id })
}

// untilClosed reads until the connection ends and returns its close status.
func (c *wsClient) untilClosed() websocket.StatusCode {
	c.t.Helper()
	for {
		if _, err := c.read(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

// say sends a user message.
func (c *wsClient) say(content string) {
	c.t.Helper()
	c.send(map[string]any{"type": "message", "content": content})
}

// reply sends a user message and returns the text of the assistant's
// reply, read up to the session.idle that follows it.
func (c *wsClient) reply(content string) string {
	c.t.Helper()
	c.say(content)
	c.until("the message "+content, func(f frame) bool {
		m := f.transcriptMessage()
		return f.Type == "message" && m.Role == model.RoleUser && m.Content == content
	})
	return c.idleReply()
}

// idleReply reads to the session.idle that follows the latest user
// message and returns the last assistant message's text before it.
func (c *wsClient) idleReply() string {
	c.t.Helper()
	var text string
	c.until("session.idle after the user's message", func(f frame) bool {
		if f.Type == "message" && f.Seq > c.userSeq {
			if m := f.transcriptMessage(); m.Role == model.RoleAssistant {
				text = m.Content
			}
		}
		return f.Type == "session.idle" && c.userSeq > 0 && f.Seq > c.userSeq
	})
	return text
}

// idleAfter is idleReply for a connection that resumed after seq, past
// the user's message.
func (c *wsClient) idleAfter(seq int64) string {
	c.t.Helper()
	c.userSeq = max(c.userSeq, seq)
	return c.idleReply()
}

// untilEach reads until every condition has held for some frame, in any
// order.
func (c *wsClient) untilEach(conds map[string]func(frame) bool) {
	c.t.Helper()
	left := maps.Clone(conds)
	c.until(strings.Join(slices.Sorted(maps.Keys(conds)), ", "), func(f frame) bool {
		for name, ok := range left {
			if ok(f) {
				delete(left, name)
			}
		}
		return len(left) == 0
	})
}

func (c *wsClient) answer(id string, attempt int, result any) {
	c.t.Helper()
	c.send(map[string]any{"type": "tool.result", "id": id, "attempt": attempt, "result": result})
}

// seqs lists the seq of every session event read.
func (c *wsClient) seqs() []int64 {
	var out []int64
	for _, f := range c.frames {
		if f.Seq != 0 && f.Type != "session.opened" {
			out = append(out, f.Seq)
		}
	}
	return out
}

// count counts the frames read that satisfy ok.
func (c *wsClient) count(ok func(frame) bool) int {
	n := 0
	for _, f := range c.frames {
		if ok(f) {
			n++
		}
	}
	return n
}

// logSink is a slog.Handler that keeps every record's message and
// attributes, so a test can wait for a log line.
type logSink struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	attrs   []slog.Attr
	parent  *logSink
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (l *logSink) root() *logSink {
	if l.parent != nil {
		return l.parent
	}
	return l
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range l.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	root.lines = append(root.lines, b.String())
	close(root.changed)
	root.changed = make(chan struct{})
	return nil
}

func (l *logSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logSink{parent: l.root(), attrs: append(slices.Clip(l.attrs), attrs...)}
}

func (l *logSink) WithGroup(string) slog.Handler { return l }

func (l *logSink) String() string {
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	return strings.Join(root.lines, "\n")
}

// wait blocks until a record's message contains msg.
func (l *logSink) wait(t *testing.T, msg string) {
	t.Helper()
	root := l.root()
	deadline := time.NewTimer(hang)
	defer deadline.Stop()
	for {
		root.mu.Lock()
		found := slices.ContainsFunc(root.lines, func(line string) bool { return strings.Contains(line, msg) })
		changed := root.changed
		root.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no log line %q", msg)
		}
	}
}

// checkSeqs fails unless seqs are exactly 1..last, each once.
func checkSeqs(t *testing.T, seqs []int64, last int64) {
	t.Helper()
	got := slices.Clone(seqs)
	slices.Sort(got)
	if int64(len(seqs)) != last || len(slices.Compact(slices.Clone(got))) != len(seqs) {
		t.Errorf("seqs seen: %v; want 1..%d, each once", seqs, last)
		return
	}
	for i, s := range got {
		if s != int64(i)+1 {
			t.Errorf("seqs seen: %v; want 1..%d, each once", seqs, last)
			return
		}
	}
}
