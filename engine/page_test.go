package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/metrics"
	dto "github.com/prometheus/client_model/go"
)

// tab is a page attached to the harness's session, read by hand: after a
// barrier (h.transcript), frames returns everything put on its stream.
type tab struct {
	t     *testing.T
	page  *engine.Page
	buf   []engine.Event
	early []engine.Event // what came with session.opened
}

func (h *harness) tab(t *testing.T, tools ...string) *tab {
	t.Helper()
	p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), Tools: tools, Buffer: 10000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Detach)
	tb := &tab{t: t, page: p}
	f := tb.frames()
	if len(f) == 0 || f[0].Type != engine.FrameSessionOpened {
		t.Fatalf("the stream does not start with session.opened: %v", f)
	}
	tb.early = f[1:]
	return tb
}

// frames takes what is on the stream now.
func (tb *tab) frames() []engine.Event {
	tb.buf = tb.page.Take(tb.buf)
	out := append(tb.early, tb.buf...)
	tb.early = nil
	return out
}

// calls returns the tool.call deliveries among frames.
func calls(t *testing.T, frames []engine.Event) []engine.ClientCall {
	t.Helper()
	var out []engine.ClientCall
	for _, ev := range frames {
		if ev.Type == engine.FrameToolCall {
			var c engine.ClientCall
			if err := json.Unmarshal(ev.Frame, &c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// pageOf is the page a tool.started or tool.leased event names.
func pageOf(t *testing.T, f frame) string {
	t.Helper()
	var v struct{ Page string }
	if err := json.Unmarshal(f.Raw, &v); err != nil {
		t.Fatal(err)
	}
	return v.Page
}

func confirmWorker(retry *engine.RetryPolicy) *testWorker {
	return &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "confirm", Handler: engine.HandlerClient, Retry: retry}}}}
}

// TestLeaseTurnPage: the page the user typed in runs the turn's client call,
// although another page that declared the tool attached after it; every
// page sees which page runs it, and only that page gets the call.
func TestLeaseTurnPage(t *testing.T) {
	h := setup(t, confirmWorker(nil), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{})
	typed := h.tab(t, "confirm")
	other := h.tab(t, "confirm")
	if err := typed.page.Send(context.Background(), "delete my draft"); err != nil {
		t.Fatal(err)
	}
	started := h.waitType(engine.EventToolStarted)
	if got := pageOf(t, started); got != typed.page.ID() {
		t.Errorf("tool.started names page %q, want the page that typed, %q", got, typed.page.ID())
	}
	h.transcript()
	if c := calls(t, typed.frames()); len(c) != 1 || c[0].ID != "call_1" || c[0].Attempt != 1 {
		t.Fatalf("the typing page got %+v, want call_1 attempt 1", c)
	}
	if c := calls(t, other.frames()); len(c) != 0 {
		t.Fatalf("the other page got %+v", c)
	}
	if err := typed.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	if fin := h.waitFinished("call_1"); !fin.OK || fin.Result != "yes" {
		t.Errorf("tool.finished %s", fin.Raw)
	}
}

// TestLeaseMostRecentlyActive: when the typing page did not declare the
// tool, the most recently active page that did runs the call.
func TestLeaseMostRecentlyActive(t *testing.T) {
	h := setup(t, confirmWorker(nil), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{})
	typed := h.tab(t) // declares nothing
	older := h.tab(t, "confirm")
	newer := h.tab(t, "confirm")
	if err := typed.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	if got := pageOf(t, h.waitType(engine.EventToolStarted)); got != newer.page.ID() {
		t.Errorf("tool.started names %q, want the most recent page %q (older %q)", got, newer.page.ID(), older.page.ID())
	}
}

// TestLeaseMovesWhenThePageLeaves: the holder detaches mid-attempt; the
// other page gets the same attempt with the same deadline, every page is
// told, and the call settles once on its answer.
func TestLeaseMovesWhenThePageLeaves(t *testing.T) {
	h := setup(t, confirmWorker(nil), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{})
	first := h.tab(t, "confirm")
	second := h.tab(t, "confirm")
	if err := first.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	h.waitType(engine.EventToolStarted)
	h.transcript()
	delivered := calls(t, first.frames())
	if len(delivered) != 1 {
		t.Fatalf("first page got %+v", delivered)
	}
	first.page.Detach()
	leased := h.waitType(engine.EventToolLeased)
	if got := pageOf(t, leased); got != second.page.ID() || leased.ID != "call_1" || leased.Attempt != 1 {
		t.Errorf("tool.leased %s, want call_1 attempt 1 on %s", leased.Raw, second.page.ID())
	}
	h.transcript()
	moved := calls(t, second.frames())
	if len(moved) != 1 || mustJSON(t, moved[0]) != mustJSON(t, delivered[0]) {
		t.Fatalf("second page got %+v, want exactly %+v", moved, delivered[0])
	}
	if err := second.page.Answer(context.Background(), engine.ToolResult{ID: "call_1", Attempt: 1, Result: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	h.waitFinished("call_1")
	h.waitIdle()
	if n := h.count(engine.EventToolFinished, "call_1"); n != 1 {
		t.Errorf("%d tool.finished", n)
	}
}

// TestLeaseMovesCounted: gateway_tool_lease_moves_total counts an attempt
// moved to another page, not a page leaving with nowhere for it to go (a
// one-tab reload mid-call read as failover).
func TestLeaseMovesCounted(t *testing.T) {
	m := metrics.New()
	h := setup(t, confirmWorker(nil), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{Metrics: m})
	first := h.tab(t, "confirm")
	second := h.tab(t, "confirm")
	if err := first.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	h.waitType(engine.EventToolStarted)
	first.page.Detach()
	h.waitType(engine.EventToolLeased)
	h.transcript()
	if n := counter(t, m, "gateway_tool_lease_moves_total"); n != 1 {
		t.Errorf("moved to the other page: %g moves counted, want 1", n)
	}
	second.page.Detach() // no page left: the attempt waits
	h.transcript()
	back := h.tab(t, "confirm")
	h.transcript()
	if c := calls(t, back.frames()); len(c) != 1 {
		t.Fatalf("the page that came back got %+v", c)
	}
	if n := counter(t, m, "gateway_tool_lease_moves_total"); n != 1 {
		t.Errorf("after the last page left and one came back: %g moves counted, want still 1", n)
	}
}

// counter reads the unlabelled counter name.
func counter(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	return metricOf(t, m, name).GetCounter().GetValue()
}

// metricOf is the one series of the family name.
func metricOf(t *testing.T, m *metrics.Metrics, name string) *dto.Metric {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0]
		}
	}
	t.Fatalf("no single series of %s", name)
	return nil
}

// TestLeaseWaitsForAPage: a call made while the page that declared its tool
// reloads waits (its attempt clock runs), and goes to the page that comes
// back, even after pages that run no tool came and went meanwhile (the AI
// SDK front end's look at a chat's last response); a tool no page declared
// fails at once (client_unavailable).
func TestLeaseWaitsForAPage(t *testing.T) {
	for _, toolless := range []int{0, 5} {
		t.Run(fmt.Sprintf("%d pages that run no tool came and went", toolless), func(t *testing.T) { leaseWaitsForAPage(t, toolless) })
	}
}

func leaseWaitsForAPage(t *testing.T, toolless int) {
	h := setup(t, confirmWorker(nil), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{})
	gone := h.tab(t, "confirm")
	gone.page.Detach()
	for range toolless {
		h.tab(t).page.Detach()
	}
	h.send("go")
	started := h.waitType(engine.EventToolStarted)
	if got := pageOf(t, started); got != "" {
		t.Errorf("tool.started names page %q while no page is attached", got)
	}
	h.transcript()
	if n := h.count(engine.EventToolFinished, ""); n != 0 {
		t.Fatalf("the call settled while its page reloads: %s", h.types())
	}
	back := h.tab(t, "confirm")
	leased := h.waitType(engine.EventToolLeased)
	if got := pageOf(t, leased); got != back.page.ID() {
		t.Errorf("tool.leased names %q, want %q", got, back.page.ID())
	}
	h.transcript()
	if c := calls(t, back.frames()); len(c) != 1 || c[0].Deadline != started.Deadline {
		t.Errorf("the page that came back got %+v, want the attempt with deadline %s", c, started.Deadline)
	}
}

// TestLeaseRetryAvoidsTheTimedOutPage: an attempt that timed out on one
// page is retried on another that declared the tool.
func TestLeaseRetryAvoidsTheTimedOutPage(t *testing.T) {
	retry := &engine.RetryPolicy{Attempts: 2, Timeout: "10s", Backoff: "1s"}
	h := setup(t, confirmWorker(retry), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{Rand: half})
	hung := h.tab(t, "confirm")
	live := h.tab(t, "confirm")
	if err := hung.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	if got := pageOf(t, h.waitType(engine.EventToolStarted)); got != hung.page.ID() {
		t.Fatalf("attempt 1 on %q, want the typing page", got)
	}
	h.clock.Advance(10 * time.Second)
	h.waitType(engine.EventToolRetrying)
	h.clock.Advance(time.Second)
	if got := pageOf(t, h.waitType(engine.EventToolStarted)); got != live.page.ID() {
		t.Errorf("attempt 2 on %q, want the other page %q", got, live.page.ID())
	}
	h.transcript()
	frames := hung.frames()
	if n := len(calls(t, frames)); n != 1 {
		t.Errorf("the hung page got %d tool.call", n)
	}
	cancelled := false
	for _, ev := range frames {
		cancelled = cancelled || (ev.Type == engine.FrameToolCancel && strings.Contains(string(ev.Frame), `"attempt":1,"reason":"timeout"`))
	}
	if !cancelled {
		t.Errorf("the hung page was not told its attempt timed out: %v", frames)
	}
	if c := calls(t, live.frames()); len(c) != 1 || c[0].Attempt != 2 {
		t.Errorf("the other page got %+v, want attempt 2", c)
	}
}

// TestNothingAfterCancel: a page never receives anything about an attempt
// after its tool.cancel, nor about a call after its tool.finished, because
// one stream carries both in the order the session made them.
func TestNothingAfterCancel(t *testing.T) {
	retry := &engine.RetryPolicy{Attempts: 1, Timeout: "10s"}
	h := setup(t, confirmWorker(retry), callsThenSummary(use("call_1", "confirm", `{}`)), engine.Options{})
	p := h.tab(t, "confirm")
	if err := p.page.Send(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	h.waitType(engine.EventToolStarted)
	h.clock.Advance(10 * time.Second)
	h.waitFinished("call_1")
	h.waitIdle()
	h.transcript()
	var order []string
	for _, ev := range p.frames() {
		if ev.Type == engine.FrameToolCall || ev.Type == engine.FrameToolCancel || ev.Type == engine.EventToolFinished {
			order = append(order, ev.Type)
		}
	}
	if strings.Join(order, " ") != "tool.call tool.cancel tool.finished" {
		t.Errorf("the page saw %v", order)
	}
}

// TestEndFromInsideDecide: a worker may end its session from inside Decide,
// on the session goroutine and on a tool.execute goroutine, without a
// deadlock; End only asks, so Decide's context is still live when End
// returns, and the session ends once Decide returned.
func TestEndFromInsideDecide(t *testing.T) {
	for _, trigger := range []string{engine.TypeMessage, engine.TypeToolExecute} {
		t.Run(trigger, func(t *testing.T) {
			var h *harness
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
			afterEnd := make(chan error, 1)
			end := func(ctx context.Context) (engine.Decision, error) {
				h.s.End(ctx, "the worker said so")
				afterEnd <- ctx.Err()
				return engine.Decision{}, nil
			}
			w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
				return end(ctx)
			}
			w.decide = func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
				if req.Trigger.TriggerType() == trigger {
					return end(ctx)
				}
				if _, ok := req.Trigger.(engine.SessionStart); ok {
					agent := w.agent
					return engine.Decision{Agent: &agent}, nil
				}
				return req.Proposed, nil
			}
			h = setup(t, w, callsThenSummary(use("call_1", "lookup", `{}`)), engine.Options{})
			h.send("go")
			// Decide runs in the session's goroutine, which takes the end
			// once Decide returns: its context is live after End. A worker
			// tool's attempt runs beside it, and the end may cancel it at
			// once (CI saw it): there End only has to return.
			if err := recv(t, afterEnd, "End returning inside Decide"); err != nil && trigger == engine.TypeMessage {
				t.Errorf("Decide's context after End: %v, want still live (End only asks)", err)
			}
			recv(t, h.s.Done(), "the session's end")
			if ended := h.waitType(engine.EventSessionEnded); ended.Reason != "the worker said so" {
				t.Errorf("session.ended %s", ended.Raw)
			}
		})
	}
}

// TestEndDoesNotWaitForAWorker: End returns by its context's deadline
// while a worker attempt ignores its cancelled context, whether End is
// called from outside or from the attempt's own goroutine (not inside
// Decide's context); the session leaves memory once the attempt returns.
func TestEndDoesNotWaitForAWorker(t *testing.T) {
	for _, from := range []string{"outside", "the attempt"} {
		t.Run(from, func(t *testing.T) {
			var h *harness
			release, running := make(chan struct{}), make(chan struct{})
			ended := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) }) // before the engine's Close, should End hang
			w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "stubborn"}}}}
			w.execute = func(context.Context, engine.ToolExecute, engine.Decision) (engine.Decision, error) {
				close(running)
				if from == "the attempt" {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					h.s.End(ctx, "from the attempt")
					cancel()
					close(ended)
				}
				<-release // ignores its context
				return engine.Decision{}, nil
			}
			h = setup(t, w, callsThenSummary(use("call_1", "stubborn", `{}`)), engine.Options{})
			h.send("go")
			recv(t, running, "the attempt running")
			if from == "outside" {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
					h.s.End(ctx, "from outside")
					cancel()
					close(ended)
				}()
			}
			recv(t, ended, "End returning while the attempt runs")
			select {
			case <-h.s.Done():
				t.Fatal("the session left memory before its worker attempt returned")
			default:
			}
			once.Do(func() { close(release) })
			recv(t, h.s.Done(), "the session's end once the attempt returned")
		})
	}
}

// leftAfterATurn is a session with Unload a minute, one turn answered
// ("hi", "done"), and its page gone: its Unload runs from now.
func leftAfterATurn(t *testing.T) *harness {
	t.Helper()
	h := setup(t, &testWorker{}, textModel(), engine.Options{Unload: time.Minute})
	h.send("hi")
	h.waitIdle()
	h.page.Detach()
	h.transcript() // a barrier: the page has left
	return h
}

// TestLoadForAnotherOwner: LoadFor refuses another owner's session as if
// the store did not have it, and a session it loaded only to refuse leaves
// memory at once, not after Unload: a client naming other browsers'
// sessions holds no memory with them. Its owner loads it as before.
func TestLoadForAnotherOwner(t *testing.T) {
	store := &loadCounting{MemoryStore: engine.NewMemoryStore()}
	h := setup(t, &testWorker{}, textModel(), engine.Options{Unload: time.Minute, Store: store})
	h.send("hi")
	h.waitIdle()
	h.page.Detach()
	h.transcript() // a barrier: the page has left
	h.clock.Advance(time.Minute)
	recv(t, h.s.Done(), "the idle session's unload")

	ctx := context.Background()
	if s, err := h.e.LoadFor(ctx, h.s.ID(), "another browser"); !errors.Is(err, engine.ErrNoSession) {
		t.Fatalf("LoadFor another owner: %v, %v; want ErrNoSession", s, err)
	}
	for deadline := time.Now().Add(hangGuard); h.e.Loaded() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the engine holds %d sessions after a refused load, with Unload a minute away", h.e.Loaded())
		}
	}
	// Named again, by that owner or another: refused without a read (its
	// owner never changes), where each read a whole journal.
	loads := store.loads.Load()
	for _, other := range []string{"another browser", "a third"} {
		if s, err := h.e.LoadFor(ctx, h.s.ID(), other); !errors.Is(err, engine.ErrNoSession) {
			t.Fatalf("LoadFor %s, again: %v, %v; want ErrNoSession", other, s, err)
		}
	}
	if n := store.loads.Load() - loads; n != 0 {
		t.Errorf("%d journal reads for a session known to be another's, want 0", n)
	}
	s, err := h.e.LoadFor(ctx, h.s.ID(), h.s.Owner())
	if err != nil || s.LastSeq() != h.s.LastSeq() {
		t.Fatalf("LoadFor its owner: %v, %v", s, err)
	}
}

// TestLoadForKeepsTheOwnersShare: going back to a chat counts against
// MaxLiveSessions as opening one does: another of the owner's sessions
// that has had no page and no work for 5 s leaves memory to make room;
// with none such the load is refused, before the journal is read. One
// just opened for a tab that has not attached yet stays. A browser loaded
// every chat it had, past any limit (an outside audit: 13 in memory with
// a limit of 3).
func TestLoadForKeepsTheOwnersShare(t *testing.T) {
	h := setup(t, &testWorker{}, textModel(), engine.Options{Unload: time.Minute, MaxLiveSessions: 2})
	ctx := context.Background()
	open := func() *engine.Session {
		t.Helper()
		s, err := h.e.Open(ctx, engine.OpenOptions{Owner: "b"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := open()
	h.clock.Advance(time.Minute)
	recv(t, old.Done(), "the old chat's unload")
	a, fresh := open(), open()
	if _, err := a.Attach(ctx, engine.AttachOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Transcript(ctx); err != nil { // a barrier: its first step is done
		t.Fatal(err)
	}
	if s, err := h.e.LoadFor(ctx, old.ID(), "b"); !errors.Is(err, engine.ErrLimitExceeded) {
		t.Fatalf("going back to a chat with one in memory with a page, one just opened: %v, %v; want ErrLimitExceeded", s, err)
	}
	if _, loaded := h.e.Session(old.ID()); loaded {
		t.Error("the chat refused was loaded")
	}
	h.clock.Advance(5 * time.Second)
	if _, err := h.e.LoadFor(ctx, old.ID(), "b"); err != nil {
		t.Fatalf("going back to a chat once another has had no page for 5 s: %v", err)
	}
	recv(t, fresh.Done(), "the chat with no page leaving to make room")
	if _, loaded := h.e.Session(a.ID()); !loaded {
		t.Error("the chat with a page left memory")
	}
}

// TestOpenedSessionWithNoPageUnloads: a session opened and never attached
// to (its opener refused the request after opening it) leaves memory after
// Unload like any other with no page; it stayed for good.
func TestOpenedSessionWithNoPageUnloads(t *testing.T) {
	h := setup(t, &testWorker{}, textModel(), engine.Options{Unload: time.Minute})
	s, err := h.e.Open(context.Background(), engine.OpenOptions{Owner: "a browser"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.e.Session(s.ID()); !ok {
		t.Fatal("the opened session is not in memory")
	}
	h.clock.Advance(time.Minute)
	recv(t, s.Done(), "the unattached session's unload")
	if _, ok := h.e.Session(s.ID()); ok {
		t.Fatal("the engine still holds the session")
	}
	if _, err := h.e.LoadFor(context.Background(), s.ID(), "a browser"); err != nil {
		t.Fatalf("the session after its unload: %v", err)
	}
}

// TestIdleSessionUnloads: a session whose last page left and that has no
// work in flight leaves memory after Unload, on the engine's clock, unless a
// page comes back first; Load brings it back as it was.
func TestIdleSessionUnloads(t *testing.T) {
	h := leftAfterATurn(t)
	h.clock.Advance(59 * time.Second)
	back := h.tab(t)
	back.page.Detach()
	h.transcript()
	h.clock.Advance(59 * time.Second) // a minute after the first left, not after the second
	h.transcript()
	if _, ok := h.e.Session(h.s.ID()); !ok {
		t.Fatal("the session unloaded although a page came back within Unload")
	}
	h.clock.Advance(time.Second)
	recv(t, h.s.Done(), "the idle session's unload")
	if _, ok := h.e.Session(h.s.ID()); ok || h.e.Loaded() != 0 {
		t.Fatal("the engine still holds the unloaded session")
	}
	// A page that held on to the unloaded session is told it unloaded,
	// not that it ended: it asks again, of the session loaded anew (a
	// page told it ended starts another).
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{}); !errors.Is(err, engine.ErrUnloaded) {
		t.Errorf("Attach to the unloaded session: %v, want ErrUnloaded", err)
	}
	last := h.s.LastSeq()
	s, err := h.e.Load(context.Background(), h.s.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s.LastSeq() != last {
		t.Errorf("loaded at seq %d, unloaded at %d", s.LastSeq(), last)
	}
	tr, err := s.Transcript(context.Background())
	if err != nil || len(tr) != 2 || tr[0].Content != "hi" || tr[1].Content != "done" {
		t.Errorf("transcript after the load: %+v, %v", tr, err)
	}
}

// TestIdleSessionUnloadsAfterALeftPageActs: a page's frame read after it
// left (its connection closes while its reader still takes what the page
// sent) does not keep the session in memory: it stayed for good, its
// unload timer spent and none armed again.
func TestIdleSessionUnloadsAfterALeftPageActs(t *testing.T) {
	h := leftAfterATurn(t)
	if err := h.page.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	recv(t, h.s.Done(), "the idle session's unload")
}

// TestAttachGivenUpLeavesNoPage: an Attach whose context ends while the
// session is busy returns the context's error, and the page it queued
// leaves once the session gets to it: the session, with no page, unloads.
func TestAttachGivenUpLeavesNoPage(t *testing.T) {
	busy, release := make(chan struct{}), make(chan struct{})
	w := &testWorker{decide: func(ctx context.Context, req engine.DecideRequest) (engine.Decision, error) {
		if _, ok := req.Trigger.(engine.SessionStart); ok {
			return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model"}}, nil
		}
		if m, ok := req.Trigger.(engine.UserMessage); ok && m.Message.Content == "hold" {
			close(busy)
			<-release
		}
		return req.Proposed, nil
	}}
	h := setup(t, w, textModel(), engine.Options{Unload: time.Minute})
	h.page.Detach()
	h.transcript() // a barrier: the page has left
	sent := make(chan error, 1)
	go func() { sent <- h.s.Send(context.Background(), "hold") }() // returns once its step, held, is stored
	recv(t, busy, "the worker holding the session")
	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan error, 1)
	go func() {
		_, err := h.s.Attach(ctx, engine.AttachOptions{After: h.s.LastSeq()})
		attached <- err
	}()
	waitUntil(t, "the attach queued behind the held step", func() bool { return h.s.Waiting() > 0 })
	cancel()
	if err := recv(t, attached, "Attach"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Attach with its context ended: %v, want context.Canceled", err)
	}
	close(release)
	if err := recv(t, sent, "Send"); err != nil {
		t.Fatal(err)
	}
	// The turn the held message started ends when it ends: the unload
	// timer starts then, so time moves until the session unloads.
	for deadline := time.Now().Add(hangGuard); ; {
		h.clock.Advance(time.Minute)
		select {
		case <-h.s.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not unload: the page its given-up Attach queued is still attached")
		}
	}
}

// TestDroppedPageRunsNoCall: a page the session dropped for falling behind
// (ErrSlowSubscriber) runs no client call, though its owner has not
// detached it yet (a socket's close handshake may take seconds): a call
// made after goes to a live page, and one it held moves to a live page.
func TestDroppedPageRunsNoCall(t *testing.T) {
	setupSlow := func(t *testing.T) (*harness, *browser) {
		b := newBrowser()
		w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "t", Handler: engine.HandlerClient}}}}
		return setup(t, w, callsThenSummary(use("c1", "t", `{}`)), engine.Options{}, b), b
	}
	ctx := context.Background()
	t.Run("dropped before the call", func(t *testing.T) {
		h, b := setupSlow(t)
		slow, err := h.s.Attach(ctx, engine.AttachOptions{Tools: []string{"t"}, Buffer: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Detach()
		if err := slow.Send(ctx, "hi"); err != nil { // the turn's page, which reads nothing
			t.Fatal(err)
		}
		if c := recv(t, b.calls, "the tool.call on the live page"); c.ID != "c1" {
			t.Errorf("the live page got %+v", c)
		}
		// Every page hears that the live page runs it: tool.started names
		// it, or tool.leased moves the call to it from the dropped page.
		h.waitFor("the live page named as the call's", func(f frame) bool {
			return (f.Type == engine.EventToolStarted || f.Type == engine.EventToolLeased) && strings.Contains(string(f.Raw), `"page":"`+h.page.ID()+`"`)
		})
	})
	t.Run("dropped while it runs the call", func(t *testing.T) {
		h, b := setupSlow(t)
		slow, err := h.s.Attach(ctx, engine.AttachOptions{Tools: []string{"t"}, Buffer: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Detach()
		if err := slow.Send(ctx, "hi"); err != nil {
			t.Fatal(err)
		}
		fctx, cancel := context.WithTimeout(ctx, hangGuard)
		defer cancel()
		for ev := range slow.Frames(fctx) {
			if ev.Type == engine.FrameToolCall {
				break // it runs c1, and reads no more
			}
		}
		if fctx.Err() != nil {
			t.Fatal("the slow page never got the tool.call")
		}
		for range 12 { // more deliveries than its buffer: a copy of a message gets message.taken
			if err := slow.SendOnce(ctx, "m1", "more"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-slow.Done():
		case <-time.After(hangGuard):
			t.Fatalf("the page that read nothing was not dropped after %s", hangGuard)
		}
		if !errors.Is(slow.Err(), engine.ErrSlowSubscriber) {
			t.Fatalf("the page's stream ended with %v, want ErrSlowSubscriber", slow.Err())
		}
		if c := recv(t, b.calls, "the call moved to the live page"); c.ID != "c1" || c.Attempt != 1 {
			t.Errorf("the live page got %+v, want c1's attempt 1", c)
		}
	})
}

// loadCounting is a MemoryStore that counts its journal reads.
type loadCounting struct {
	*engine.MemoryStore
	loads atomic.Int32
}

func (s *loadCounting) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	s.loads.Add(1)
	return s.MemoryStore.Load(ctx, session)
}
