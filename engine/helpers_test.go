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

// fakeRouter is a ClientRouter made of function fields; nil fields accept.
type fakeRouter struct {
	dispatch func(call engine.ClientCall) error
	release  func(session, id string, attempt int, reason engine.CancelReason)
}

var _ engine.ClientRouter = fakeRouter{}

func (r fakeRouter) Dispatch(call engine.ClientCall) error {
	if r.dispatch == nil {
		return nil
	}
	return r.dispatch(call)
}

func (r fakeRouter) Release(session, id string, attempt int, reason engine.CancelReason) {
	if r.release != nil {
		r.release(session, id, attempt, reason)
	}
}

// release is one ClientRouter.Release.
type release struct {
	ID      string
	Attempt int
	Abort   bool // a reason was given: the browser is sent tool.cancel
	Reason  engine.CancelReason
}

// browser records what a fakeRouter is asked: dispatches arrive on calls,
// releases on releases.
type browser struct {
	calls    chan engine.ClientCall
	releases chan release
}

func newBrowser() *browser {
	return &browser{calls: make(chan engine.ClientCall, 100), releases: make(chan release, 100)}
}

func (b *browser) router() fakeRouter {
	return fakeRouter{
		dispatch: func(call engine.ClientCall) error { b.calls <- call; return nil },
		release: func(_, id string, attempt int, reason engine.CancelReason) {
			b.releases <- release{ID: id, Attempt: attempt, Abort: reason != "", Reason: reason}
		},
	}
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
	sub    *engine.Subscription
	clock  *clock.Fake
	model  *fakeModel
	worker *testWorker
	seen   []frame // every event read so far
}

// setup opens a session on an engine with opts, filling in a fake clock
// (unless opts.Clock is set), a quiet logger, the worker and the model.
func setup(t tb, w *testWorker, m *fakeModel, opts engine.Options) *harness {
	t.Helper()
	h := &harness{t: t, model: m, worker: w}
	if opts.Clock == nil {
		h.clock = clock.NewFake(epoch)
		opts.Clock = h.clock
	}
	if opts.Logger == nil {
		opts.Logger = quiet()
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
	s, err := e.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	replay, sub, err := s.Subscribe(0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	h.sub = sub
	idle := false
	for _, ev := range replay {
		f := decodeFrame(t, ev)
		h.seen = append(h.seen, f)
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
