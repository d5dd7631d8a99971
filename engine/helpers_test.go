package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tb is what the helpers need of a test: *testing.T and *rapid.T both
// have it.
type tb interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// hangGuard bounds every wait of a test. Tests never assert on elapsed time;
// this only turns a hang into a failure.
const hangGuard = 10 * time.Second

// epoch is where every fake clock starts.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// recv takes one value from ch, failing the test after hangGuard.
func recv[T any](t tb, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("no %s after %s", what, hangGuard)
		panic("unreachable")
	}
}

// waitUntil polls ok until it holds, failing the test after hangGuard.
func waitUntil(t tb, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, hangGuard)
		}
	}
}

// quiet is a logger that drops everything.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeModel answers model turns with reply and records every request.
type fakeModel struct {
	reply func(ctx context.Context, req model.Request) (model.Response, error)

	mu   sync.Mutex
	reqs []model.Request
}

func (m *fakeModel) Generate(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	resp, err := m.reply(ctx, req)
	if resp.Text != "" {
		onDelta(resp.Text)
	}
	return resp, err
}

// requests returns the requests so far.
func (m *fakeModel) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// last returns the latest request.
func (m *fakeModel) last(t tb) model.Request {
	t.Helper()
	reqs := m.requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never prompted")
	}
	return reqs[len(reqs)-1]
}

// callsThenSummary is a model that answers a user message with uses, and
// tool results with a text that quotes them: "saw: a | b". Without uses it
// answers a user message with "ok". From the second user message on, the
// uses' ids get a suffix ("call_1-2"), so they stay unique.
func callsThenSummary(uses ...model.ToolUse) *fakeModel {
	var turns atomic.Int32
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		msgs := req.Messages
		last := msgs[len(msgs)-1]
		if last.Role != model.RoleTool {
			if len(uses) == 0 {
				return model.Response{Text: "ok", StopReason: model.StopEndTurn}, nil
			}
			n := turns.Add(1)
			out := append([]model.ToolUse(nil), uses...)
			for i := range out {
				if n > 1 {
					out[i].ID = fmt.Sprintf("%s-%d", out[i].ID, n)
				}
			}
			return model.Response{ToolUses: out, StopReason: model.StopToolUse}, nil
		}
		var seen []string
		for i := len(msgs) - 1; i >= 0 && msgs[i].Role == model.RoleTool; i-- {
			seen = append([]string{msgs[i].Content}, seen...)
		}
		return model.Response{Text: "saw: " + strings.Join(seen, " | "), StopReason: model.StopEndTurn}, nil
	}}
}

// use is a model tool use.
func use(id, name, args string) model.ToolUse {
	return model.ToolUse{ID: id, Name: name, Arguments: args}
}

// toolMessages returns the tool messages of a transcript.
func toolMessages(msgs []model.Message) []model.Message {
	var out []model.Message
	for _, m := range msgs {
		if m.Role == model.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// testWorker is a worker made of function fields: it answers session.start
// with agent, tool.execute with execute, and every other trigger with
// decide, or the proposal when that is nil. It records every request.
type testWorker struct {
	agent   engine.AgentConfig
	execute func(ctx context.Context, t engine.ToolExecute, proposed engine.Decision) (engine.Decision, error)
	decide  func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error)

	mu   sync.Mutex
	seen []engine.DecideRequest
}

func (w *testWorker) Decide(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
	w.mu.Lock()
	w.seen = append(w.seen, req)
	w.mu.Unlock()
	if w.decide != nil {
		if _, ok := req.Trigger.(engine.ToolExecute); !ok {
			return w.decide(ctx, req)
		}
	}
	switch t := req.Trigger.(type) {
	case engine.SessionStart:
		agent := w.agent
		return engine.Decision{Agent: &agent}, nil
	case engine.ToolExecute:
		if w.execute != nil {
			return w.execute(ctx, t, req.Proposed)
		}
	}
	return req.Proposed, nil
}

// requests returns the requests of the given trigger type, in order.
func (w *testWorker) requests(typ string) []engine.DecideRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []engine.DecideRequest
	for _, r := range w.seen {
		if r.Trigger.TriggerType() == typ {
			out = append(out, r)
		}
	}
	return out
}

// release is a tool.cancel delivered to the harness's page.
type release struct {
	ID      string
	Attempt int
	Reason  engine.CancelReason
}

// browser records the deliveries to the harness's page: tool.call on
// calls, tool.cancel on releases. Its page declares tools, or, when tools
// is nil, every client tool of the agent.
type browser struct {
	tools    []string
	calls    chan engine.ClientCall
	releases chan release
}

func newBrowser() *browser {
	return &browser{calls: make(chan engine.ClientCall, 100), releases: make(chan release, 100)}
}

// stream is the harness's view of its page: the numbered events on C, the
// deliveries on its browser's channels.
type stream struct {
	c     chan engine.Event
	done  chan struct{}
	err   error              // set before done closes
	flush chan chan struct{} // take what is queued now, then reply
}

func (s *stream) C() <-chan engine.Event { return s.c }
func (s *stream) Done() <-chan struct{}  { return s.done }
func (s *stream) Err() error             { <-s.done; return s.err }

// sync makes every frame published so far readable from C and the
// browser's channels.
func (s *stream) sync() {
	reply := make(chan struct{})
	select {
	case s.flush <- reply:
		<-reply
	case <-s.done:
	}
}

// pump reads page's stream until it ends, sending session events to the
// stream and deliveries to b (dropped when b is nil).
func pump(t tb, page *engine.Page, b *browser) *stream {
	st := &stream{c: make(chan engine.Event, 10000), done: make(chan struct{}), flush: make(chan chan struct{})}
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-st.done
	})
	route := func(ev engine.Event) {
		switch ev.Type {
		case engine.FrameSessionOpened:
		case engine.FrameToolCall:
			var c engine.ClientCall
			if err := json.Unmarshal(ev.Frame, &c); err != nil {
				t.Errorf("tool.call %s: %v", ev.Frame, err)
			}
			if b != nil {
				b.calls <- c
			}
		case engine.FrameToolCancel:
			var c engine.ToolCancelFrame
			if err := json.Unmarshal(ev.Frame, &c); err != nil {
				t.Errorf("tool.cancel %s: %v", ev.Frame, err)
			}
			if b != nil {
				b.releases <- release{ID: c.ID, Attempt: c.Attempt, Reason: c.Reason}
			}
		default:
			st.c <- ev
		}
	}
	go func() {
		defer close(st.done)
		var frames []engine.Event
		take := func() {
			frames = page.Take(frames)
			for _, ev := range frames {
				route(ev)
			}
		}
		for {
			select {
			case <-page.Ready():
				take()
			case reply := <-st.flush:
				take()
				close(reply)
			case <-stop:
				return
			}
			select {
			case <-page.Done():
				take()
				st.err = page.Err()
				return
			default:
			}
		}
	}()
	return st
}

// frame is a decoded session event; fields are filled as the type has them.
type frame struct {
	Type       string           `json:"type"`
	Seq        int64            `json:"seq"`
	ID         string           `json:"id"`
	Name       string           `json:"name"`
	Arguments  string           `json:"arguments"`
	Input      engine.ToolInput `json:"input"`
	Handler    string           `json:"handler"`
	Attempt    int              `json:"attempt"`
	Attempts   int              `json:"attempts"`
	Deadline   string           `json:"deadline"`
	Backoff    string           `json:"backoff"`
	OK         bool             `json:"ok"`
	Result     string           `json:"result"`
	Error      string           `json:"error"`
	Code       string           `json:"code"`
	Detail     json.RawMessage  `json:"detail"`
	Text       string           `json:"text"`
	StopReason string           `json:"stopReason"`
	Reason     string           `json:"reason"`
	Data       json.RawMessage  `json:"data"`
	Message    json.RawMessage  `json:"message"` // an object on message events, a string on error events
	Raw        json.RawMessage  `json:"-"`
}

// msg is a message event's message.
func (f frame) msg(t tb) model.Message {
	t.Helper()
	var m model.Message
	if err := json.Unmarshal(f.Message, &m); err != nil {
		t.Fatalf("message event %s: %v", f.Raw, err)
	}
	return m
}

// errorText is an error event's message.
func (f frame) errorText() string {
	var s string
	_ = json.Unmarshal(f.Message, &s)
	return s
}

func decodeFrame(t tb, ev engine.Event) frame {
	t.Helper()
	var f frame
	if err := json.Unmarshal(ev.Frame, &f); err != nil {
		t.Fatalf("event %d %s: %v", ev.Seq, ev.Frame, err)
	}
	if f.Type != ev.Type || f.Seq != ev.Seq {
		t.Fatalf("event {Seq:%d Type:%s} has frame %s", ev.Seq, ev.Type, ev.Frame)
	}
	f.Raw = ev.Frame
	return f
}

// harness is an engine with one open session and a subscription to all its
// events.
type harness struct {
	t      tb
	e      *engine.Engine
	s      *engine.Session
	page   *engine.Page
	sub    *stream
	clock  *clock.Fake
	model  *fakeModel
	worker *testWorker
	seen   []frame // every event read so far
}

// setup opens a session on an engine with opts, filling in a fake clock
// (unless opts.Clock is set), a quiet logger, the worker and the model, and
// attaches a page: it declares the browser's tools when one is given, and
// none otherwise.
func setup(t tb, w *testWorker, m *fakeModel, opts engine.Options, browsers ...*browser) *harness {
	t.Helper()
	h := &harness{t: t, model: m, worker: w}
	if opts.Clock == nil {
		h.clock = clock.NewFake(epoch)
		opts.Clock = h.clock
	}
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.Retain == 0 {
		opts.Retain = -1 // no sweeper timer on the fake clock, unless a test wants one
	}
	if w.agent.Model == "" {
		w.agent.Model = "fake-model"
	}
	opts.Worker = w
	if opts.Models == nil {
		opts.Models = model.ResolverFunc(func(id string) (model.Model, error) { return m, nil })
	}
	e, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("engine.Close: %v", err)
		}
	})
	s, err := e.Open(context.Background(), engine.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	var b *browser
	var tools []string
	if len(browsers) > 0 {
		b = browsers[0]
		tools = b.tools
		if tools == nil {
			for _, tool := range w.agent.Tools {
				if tool.Handler == engine.HandlerClient {
					tools = append(tools, tool.Name)
				}
			}
		}
	}
	page, err := s.Attach(context.Background(), engine.AttachOptions{Tools: tools, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	h.page = page
	h.sub = pump(t, page, b)
	// session.start's idle may come before or after the page attached.
	idle := false
	for _, f := range h.drainBuffered() {
		idle = idle || f.Type == engine.EventSessionIdle
	}
	if !idle {
		// session.start's idle is published just after Open returns.
		h.waitIdle()
	}
	return h
}

// waitFor reads events until one satisfies ok, and returns it. Events
// buffered before the subscription ended are still read.
func (h *harness) waitFor(what string, ok func(f frame) bool) frame {
	h.t.Helper()
	deadline := time.After(hangGuard)
	for {
		select {
		case ev := <-h.sub.C():
			f := decodeFrame(h.t, ev)
			h.seen = append(h.seen, f)
			if ok(f) {
				return f
			}
		case <-h.sub.Done():
			select {
			case ev := <-h.sub.C():
				f := decodeFrame(h.t, ev)
				h.seen = append(h.seen, f)
				if ok(f) {
					return f
				}
				continue
			default:
			}
			h.t.Fatalf("subscription ended (%v) while waiting for %s; seen %s", h.sub.Err(), what, h.types())
		case <-deadline:
			h.t.Fatalf("no %s after %s; seen %s", what, hangGuard, h.types())
		}
	}
}

// waitType waits for the next event of type typ.
func (h *harness) waitType(typ string) frame {
	h.t.Helper()
	return h.waitFor(typ, func(f frame) bool { return f.Type == typ })
}

// waitFinished waits for the tool.finished event of call id.
func (h *harness) waitFinished(id string) frame {
	h.t.Helper()
	return h.waitFor("tool.finished "+id, func(f frame) bool { return f.Type == engine.EventToolFinished && f.ID == id })
}

// waitIdle waits for session.idle.
func (h *harness) waitIdle() {
	h.t.Helper()
	h.waitType(engine.EventSessionIdle)
}

// send sends a user message.
func (h *harness) send(text string) {
	h.t.Helper()
	if err := h.s.Send(context.Background(), text); err != nil {
		h.t.Fatalf("Send: %v", err)
	}
}

// answer answers a client call and fails on an error.
func (h *harness) answer(a engine.Action) {
	h.t.Helper()
	if err := h.s.Answer(context.Background(), a); err != nil {
		h.t.Fatalf("Answer(%+v): %v", a, err)
	}
}

// transcript returns the session's transcript. It is also a barrier: every
// message posted to the session before it (timer callbacks, for one) has
// been handled when it returns.
func (h *harness) transcript() []model.Message {
	h.t.Helper()
	tr, err := h.s.Transcript(context.Background())
	if err != nil {
		h.t.Fatalf("Transcript: %v", err)
	}
	h.sub.sync()
	return tr
}

// types lists the types of the events seen, for failure messages.
func (h *harness) types() string {
	var b strings.Builder
	for i, f := range h.seen {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(f.Type)
		if f.ID != "" {
			b.WriteString("(" + f.ID + ")")
		}
	}
	return b.String()
}

// count counts the events seen of type typ (and call id, when not empty).
func (h *harness) count(typ, id string) int {
	n := 0
	for _, f := range h.seen {
		if f.Type == typ && (id == "" || f.ID == id) {
			n++
		}
	}
	return n
}

// mustJSON encodes v.
func mustJSON(t tb, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", v, err)
	}
	return string(b)
}

// weatherInput is the seed's get_weather input schema.
const weatherInput = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

// drainBuffered returns the events buffered now, without waiting. After a
// barrier (transcript, or a synchronous Answer) that is every event the
// session published so far.
func (h *harness) drainBuffered() []frame {
	h.sub.sync()
	var out []frame
	for {
		select {
		case ev := <-h.sub.C():
			f := decodeFrame(h.t, ev)
			h.seen = append(h.seen, f)
			out = append(out, f)
		default:
			return out
		}
	}
}
