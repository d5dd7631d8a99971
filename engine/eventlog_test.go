package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/store/storetest"
	"github.com/clienttools/gateway/testlog"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// stored flattens a session's journal into its events.
func stored(t tb, store engine.Store, session string) []engine.Event {
	t.Helper()
	batches, err := store.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Event
	for _, b := range batches {
		out = append(out, b.Events...)
	}
	return out
}

// textModel is a model that answers every turn with "done".
func textModel() *fakeModel {
	return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
	}}
}

// TestEventsSeqStoreAndReplay: every session event gets the next seq, goes
// to the Store and to every subscriber; a subscriber that joins at any point
// with any `after` gets every event after it exactly once, in order, with no
// gap between the replay and the live events: from the session's memory,
// or from the store for events the session no longer keeps, while more
// leave its memory as the model streams.
func TestEventsSeqStoreAndReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int
	}{
		{"replays from memory", 0},
		{"replays from the store", 1},
	} {
		t.Run(tc.name, func(t *testing.T) { seqStoreAndReplay(t, tc.keep) })
	}
}

func seqStoreAndReplay(t *testing.T, keep int) {
	var mu sync.Mutex
	var appended []engine.Event
	store := engine.NewMemoryStore()
	store.Fail = func(_ string, b engine.Batch) error {
		mu.Lock()
		appended = append(appended, b.Events...)
		mu.Unlock()
		return nil
	}
	const deltas = 200
	m := &fakeModel{}
	joined := make(chan struct{}) // closed once every subscriber has joined
	streaming := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		var b strings.Builder
		for i := range deltas {
			if i == deltas/2 {
				<-joined
			}
			piece := fmt.Sprintf("%d ", i)
			b.WriteString(piece)
			onDelta(piece)
		}
		return model.Response{Text: b.String(), StopReason: model.StopEndTurn}, nil
	})
	h := setup(t, &testWorker{}, m, engine.Options{Store: store, ReplayBytes: keep, Models: model.ResolverFunc(func(string) (model.Model, error) { return streaming, nil })})

	// Subscribers join while the model streams, each after a different seq,
	// and read until the turn's session.idle.
	type result struct {
		after  int64
		events []engine.Event
		err    error
	}
	const subscribers = 20
	results := make(chan result, subscribers)
	var joins sync.WaitGroup
	h.send("count")
	for i := range subscribers {
		joins.Add(1)
		go func() {
			after := max(h.s.LastSeq()-int64(i%4)*int64(i%4)*15, 0)
			page, err := h.s.Attach(context.Background(), engine.AttachOptions{After: after, Buffer: 4096})
			joins.Done()
			if err != nil {
				results <- result{after: after, err: err}
				return
			}
			defer page.Detach()
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			var events []engine.Event
			for ev := range page.Frames(ctx) {
				if ev.Seq == 0 {
					continue // session.opened
				}
				events = append(events, ev)
				if ev.Type == engine.EventSessionIdle {
					results <- result{after: after, events: events}
					return
				}
			}
			results <- result{after: after, err: fmt.Errorf("the stream ended before session.idle: %v", page.Err())}
		}()
	}
	joins.Wait()
	close(joined)
	h.waitIdle()
	var got []result
	for range subscribers {
		got = append(got, recv(t, results, "a subscriber's events"))
	}

	all := stored(t, store, h.s.ID())
	if n := h.s.LastSeq(); int64(len(all)) != n {
		t.Fatalf("the store holds %d events, LastSeq is %d", len(all), n)
	}
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("stored event %d has seq %d", i, ev.Seq)
		}
		want := fmt.Sprintf(`{"type":%q,"seq":%d`, ev.Type, ev.Seq)
		if !strings.HasPrefix(string(ev.Frame), want) {
			t.Fatalf("frame %s does not start with %s", ev.Frame, want)
		}
	}
	mu.Lock()
	if len(appended) != len(all) {
		t.Errorf("Append was called %d times for %d events", len(appended), len(all))
	}
	mu.Unlock()
	// The subscription of the harness saw them all, in order, once.
	for i, f := range h.seen {
		if f.Seq != int64(i+1) || string(f.Raw) != string(all[i].Frame) {
			t.Fatalf("the harness's event %d is %s, the store's %s", i, f.Raw, all[i].Frame)
		}
	}
	for _, r := range got {
		if r.err != nil {
			t.Errorf("subscriber after %d: %v", r.after, r.err)
			continue
		}
		for i, ev := range r.events {
			want := all[r.after+int64(i)]
			if ev.Seq != want.Seq || string(ev.Frame) != string(want.Frame) {
				t.Fatalf("subscriber after %d: event %d is seq %d, want %d (gap or duplicate)", r.after, i, ev.Seq, want.Seq)
			}
		}
	}
	if got := h.count(engine.EventModelDelta, ""); got != deltas {
		t.Errorf("%d model.delta events, want %d", got, deltas)
	}
}

// take attaches a page after `after` and returns its first frames:
// session.opened, then the replay.
func take(t *testing.T, s *engine.Session, after int64) ([]engine.Event, *engine.Page) {
	t.Helper()
	page, err := s.Attach(context.Background(), engine.AttachOptions{After: after})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(page.Detach)
	frames := page.Take(nil)
	if len(frames) == 0 || frames[0].Type != engine.FrameSessionOpened {
		t.Fatalf("the stream does not start with session.opened: %v", frames)
	}
	return frames, page
}

func TestAttach(t *testing.T) {
	h := setup(t, &testWorker{}, textModel(), engine.Options{})
	h.send("hi")
	h.waitIdle()
	last := h.s.LastSeq()

	t.Run("after the last event", func(t *testing.T) {
		frames, page := take(t, h.s, last)
		var opened engine.SessionOpenedFrame
		if err := json.Unmarshal(frames[0].Frame, &opened); err != nil {
			t.Fatal(err)
		}
		if len(frames) != 1 || opened.Seq != last || opened.Session != h.s.ID() || opened.Page != page.ID() || page.ID() == h.page.ID() {
			t.Fatalf("Attach(last): %d frames, opened %+v (page %s, the harness's %s)", len(frames), opened, page.ID(), h.page.ID())
		}
		page.Detach()
		recv(t, page.Done(), "done")
		if page.Err() != nil {
			t.Errorf("Err after Detach: %v", page.Err())
		}
		page.Detach() // twice is harmless
	})
	t.Run("beyond the last event", func(t *testing.T) {
		if _, err := h.s.Attach(context.Background(), engine.AttachOptions{After: last + 1}); err == nil || !strings.Contains(err.Error(), "beyond the session's last event") {
			t.Errorf("Attach(last+1): %v", err)
		}
	})
	t.Run("a replay is the stored frames", func(t *testing.T) {
		frames, _ := take(t, h.s, 2)
		replay := frames[1:]
		if int64(len(replay)) != last-2 || replay[0].Seq != 3 {
			t.Fatalf("replay after 2: %d events from %d", len(replay), replay[0].Seq)
		}
		for _, ev := range replay {
			if string(ev.Frame) != string(h.seen[ev.Seq-1].Raw) {
				t.Errorf("replayed %s, live was %s", ev.Frame, h.seen[ev.Seq-1].Raw)
			}
		}
	})
	t.Run("a slow page is dropped, not waited for", func(t *testing.T) {
		slow, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(), Buffer: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Detach()
		h.send("more")
		h.waitIdle()
		recv(t, slow.Done(), "slow page dropped")
		if !errors.Is(slow.Err(), engine.ErrSlowSubscriber) {
			t.Errorf("Err %v", slow.Err())
		}
	})
	t.Run("WriteNow hands the events to the page outside the lock", func(t *testing.T) {
		var mu sync.Mutex
		var got []engine.Event
		wakes := 0
		var page atomic.Pointer[engine.Page]
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: h.s.LastSeq(),
			Wake: func() { mu.Lock(); wakes++; mu.Unlock() },
			WriteNow: func() {
				if p := page.Load(); p != nil {
					// Take takes the session's event lock: WriteNow runs
					// without it.
					frames := p.Take(nil)
					mu.Lock()
					got = append(got, frames...)
					mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Detach()
		page.Store(p)
		from := h.s.LastSeq()
		opened := p.Take(nil) // session.opened, woken by Wake
		mu.Lock()
		attachWakes := wakes
		mu.Unlock()
		if len(opened) != 1 || attachWakes != 1 {
			t.Fatalf("attach: %d frames, %d wakes; want session.opened and one Wake", len(opened), attachWakes)
		}
		h.send("again")
		h.waitIdle()
		// The harness's page saw session.idle when it was pushed; this
		// page's WriteNow comes once the lock is released.
		last := h.s.LastSeq()
		deadline := time.Now().Add(hangGuard)
		for {
			mu.Lock()
			n := int64(len(got))
			mu.Unlock()
			if n >= last-from || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if int64(len(got)) != last-from {
			t.Fatalf("WriteNow took %d events, want the turn's %d", len(got), last-from)
		}
		for i, ev := range got {
			if ev.Seq != from+1+int64(i) {
				t.Fatalf("event %d has seq %d, want %d: in order, none twice", i, ev.Seq, from+1+int64(i))
			}
		}
		if wakes != attachWakes {
			t.Errorf("Wake called %d times for the session's events: WriteNow replaces it", wakes-attachWakes)
		}
	})
	t.Run("limits on declared tools", func(t *testing.T) {
		many := make([]string, engine.DefaultMaxPageTools+1)
		for i := range many {
			many[i] = fmt.Sprintf("tool_%d", i)
		}
		for _, tools := range [][]string{many, {strings.Repeat("x", engine.MaxToolNameBytes+1)}} {
			if _, err := h.s.Attach(context.Background(), engine.AttachOptions{Tools: tools}); !errors.Is(err, engine.ErrLimitExceeded) {
				t.Errorf("Attach with %d tools: %v, want ErrLimitExceeded", len(tools), err)
			}
		}
		if _, err := h.s.Attach(context.Background(), engine.AttachOptions{Tools: []string{""}}); err == nil {
			t.Error("Attach with an empty tool name worked")
		}
	})
}

// TestHealthIsTheStoresWord: the node's health (readiness, the
// store-failing metric) is the store's. An append fenced because another
// node took the session (its lease lapsed) is no store failure: the
// session leaves memory, and the node stays healthy, where it answered
// not ready until another session's append failed and then succeeded.
func TestHealthIsTheStoresWord(t *testing.T) {
	store := engine.NewMemoryStore()
	var mu sync.Mutex
	var fail error
	store.Fail = func(string, engine.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		return fail
	}
	setFail := func(err error) { mu.Lock(); fail = err; mu.Unlock() }
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store})
	setFail(fmt.Errorf("%w: this node's lease on session %s was lost", engine.ErrFenced, h.s.ID()))
	_ = h.s.Send(context.Background(), "hi")
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(time.Millisecond) {
		if _, loaded := h.e.Session(h.s.ID()); !loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fenced session stayed in memory")
		}
	}
	if err := h.e.Health(); err != nil {
		t.Errorf("Health after another node took a session: %v, want nil", err)
	}

}

// TestStoreFailure: write-ahead. While the store refuses a session's
// events, no page sees them and the session takes no new turn, with an
// error that names the cause; once the store takes them again, every page
// gets them, in order, and nothing is lost.
func TestStoreFailure(t *testing.T) {
	store := engine.NewMemoryStore()
	var mu sync.Mutex
	full := false // the disk is full
	store.Fail = func(string, engine.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		if full {
			return errors.New("no space left on device")
		}
		return nil
	}
	setFull := func(on bool) { mu.Lock(); full = on; mu.Unlock() }
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store})
	before := h.s.LastSeq()
	setFull(true)
	h.send("hi")
	h.transcript()
	if got := h.drainBuffered(); len(got) != 0 {
		t.Fatalf("a page saw events the store refused: %v", h.types())
	}
	if err := h.s.Send(context.Background(), "again"); !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("Send while the store fails: %v", err)
	}
	if err := h.e.Health(); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Health while the store fails: %v", err)
	}
	setFull(false)
	h.clock.Advance(time.Second) // the retry
	h.waitIdle()
	if err := h.e.Health(); err != nil {
		t.Errorf("Health once the store recovered: %v", err)
	}
	all := stored(t, store, h.s.ID())
	if int64(len(all)) != h.s.LastSeq() || h.s.LastSeq() <= before {
		t.Fatalf("stored %d events, LastSeq %d", len(all), h.s.LastSeq())
	}
	for i, f := range h.seen {
		if f.Seq != int64(i+1) || string(f.Raw) != string(all[i].Frame) {
			t.Fatalf("the page's event %d is %s, the store's %s", i, f.Raw, all[i].Frame)
		}
	}
	if h.count(engine.EventMessage, "") != 2 {
		t.Errorf("events %s", h.types())
	}
}

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) engine.Store { return engine.NewMemoryStore() })
}

// TestEventFrames: an event is the exact frame the browser receives, type
// first, then seq.
func TestEventFrames(t *testing.T) {
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "lookup"}}}}
	w.execute = func(ctx context.Context, _ engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
		return engine.Decision{Actions: []engine.Action{engine.ToolError{Error: "nope", Code: "not_found"}}}, nil
	}
	h := setup(t, w, callsThenSummary(use("call_1", "lookup", `{"q":1}`)), engine.Options{})
	h.send("go")
	h.waitIdle()
	want := map[string]string{
		engine.EventToolStarted:  `{"type":"tool.started","seq":%d,"id":"call_1","name":"lookup","arguments":"{\"q\":1}","input":{"status":"valid","value":{"q":1}},"handler":"worker","attempt":1,"attempts":1,"deadline":"2026-01-02T03:09:05.000Z"}`,
		engine.EventToolFinished: `{"type":"tool.finished","seq":%d,"id":"call_1","ok":false,"name":"lookup","error":"nope","code":"not_found"}`,
		engine.EventSessionIdle:  `{"type":"session.idle","seq":%d}`,
	}
	for _, f := range h.seen {
		if w, ok := want[f.Type]; ok {
			if got := string(f.Raw); got != fmt.Sprintf(w, f.Seq) {
				t.Errorf("frame\n %s\nwant %s", got, fmt.Sprintf(w, f.Seq))
			}
		}
	}
}

// TestWorkStartsOnceItsStepIsStored: write-ahead for what a step starts. A
// model turn and a worker attempt start only once the store holds the step
// that started them, so a crash before the append leaves nothing running
// that the journal does not know of; and a step the store fences (another
// node runs the session now) starts nothing.
func TestWorkStartsOnceItsStepIsStored(t *testing.T) {
	cases := []struct {
		name   string
		holdOn string // the step that starts the work: the batch with this event
		tools  []engine.AgentTool
		model  *fakeModel
	}{
		{"model turn", engine.EventMessage, nil, textModel()},
		{"worker attempt", engine.EventToolStarted,
			[]engine.AgentTool{{Name: "lookup", Handler: engine.HandlerWorker}},
			callsThenSummary(use("call_1", "lookup", `{}`))},
	}
	for _, tc := range cases {
		for _, fenced := range []bool{false, true} {
			name := tc.name
			if fenced {
				name += ", fenced"
			}
			t.Run(name, func(t *testing.T) {
				store := &stepRecorder{MemoryStore: engine.NewMemoryStore(), step: tc.holdOn, ran: make(chan struct{}, 1)}
				if fenced {
					store.Fail = func(_ string, b engine.Batch) error {
						if store.starts(b) {
							return engine.ErrFenced
						}
						return nil
					}
				}
				var early, ran atomic.Int32
				work := func() {
					ran.Add(1)
					if !store.stored.Load() {
						early.Add(1)
					}
					select {
					case store.ran <- struct{}{}:
					default:
					}
				}
				reply := tc.model.reply
				tc.model.reply = func(ctx context.Context, req model.Request) (model.Response, error) {
					if tc.holdOn == engine.EventMessage {
						work()
					}
					return reply(ctx, req)
				}
				w := &testWorker{agent: engine.AgentConfig{Tools: tc.tools},
					execute: func(_ context.Context, t engine.ToolExecute, _ engine.Decision) (engine.Decision, error) {
						work()
						return engine.Decision{Actions: []engine.Action{engine.ToolResult{ID: t.ID, Result: json.RawMessage(`"found"`)}}}, nil
					}}
				h := setup(t, w, tc.model, engine.Options{Store: store})
				if fenced {
					// The sender of a message whose own step was refused
					// hears so: it was not stored.
					err := h.s.Send(context.Background(), "hi")
					if tc.holdOn == engine.EventMessage && !errors.Is(err, engine.ErrUnloaded) || tc.holdOn != engine.EventMessage && err != nil {
						t.Fatalf("Send: %v", err)
					}
					recv(t, h.s.Done(), "the fenced session's leaving")
					if n := ran.Load(); n != 0 {
						t.Fatalf("the %s ran %d times for a step another node's journal refused", tc.name, n)
					}
					return
				}
				h.send("hi")
				h.waitIdle()
				switch {
				case ran.Load() == 0:
					t.Fatalf("the %s never ran", tc.name)
				case early.Load() != 0:
					t.Fatalf("the %s started before the step that started it was stored", tc.name)
				}
			})
		}
	}
}

// stepRecorder is a memory store that says when it has stored a batch
// with the event step. It holds that batch until the work runs (ran) or
// a while passes, so work that starts early starts before it is stored
// (unless Fail is set: the batch is refused).
type stepRecorder struct {
	*engine.MemoryStore
	step   string
	ran    chan struct{}
	stored atomic.Bool
}

func (s *stepRecorder) starts(b engine.Batch) bool {
	return slices.ContainsFunc(b.Events, func(ev engine.Event) bool { return ev.Type == s.step })
}

func (s *stepRecorder) Append(ctx context.Context, session string, b engine.Batch) error {
	if s.starts(b) && !s.stored.Load() && s.Fail == nil {
		select {
		case <-s.ran:
		case <-time.After(100 * time.Millisecond):
		}
	}
	err := s.MemoryStore.Append(ctx, session, b)
	if err == nil && s.starts(b) {
		s.stored.Store(true)
	}
	return err
}

// answered answers a client call whose tool.finished step the store
// meets with fail (each try of it numbered from 1), on a session whose log
// and metrics are kept. It returns the harness, the call's id, the log,
// the metrics, and Answer's error.
func answered(t *testing.T, fail func(try int) error) (*harness, string, *testlog.Buffer, *metrics.Metrics, error) {
	t.Helper()
	store := engine.NewMemoryStore()
	var mu sync.Mutex
	tries := 0
	store.Fail = func(_ string, b engine.Batch) error {
		if !slices.ContainsFunc(b.Events, func(ev engine.Event) bool { return ev.Type == engine.EventToolFinished }) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		tries++
		return fail(tries)
	}
	b := newBrowser()
	logs := &testlog.Buffer{}
	m := metrics.New()
	w := &testWorker{agent: engine.AgentConfig{Tools: []engine.AgentTool{{Name: "get_location", Handler: engine.HandlerClient}}}}
	h := setup(t, w, callsThenSummary(use("loc", "get_location", `{}`)),
		engine.Options{Store: store, Metrics: m, Logger: slog.New(slog.NewTextHandler(logs, nil))}, b)
	h.send("where am I")
	c := recv(t, b.calls, "the client call")
	err := h.s.Answer(context.Background(), engine.ToolResult{ID: c.ID, Attempt: c.Attempt, Result: json.RawMessage(`"Tokyo"`)})
	return h, c.ID, logs, m, err
}

// settledSaid counts the settled calls logged, and the series of the
// settled calls' counter.
func settledSaid(logs *testlog.Buffer, m *metrics.Metrics) (logged, counted int) {
	return strings.Count(logs.String(), "tool call settled"), testutil.CollectAndCount(m.Registry(), "gateway_tool_calls_settled_total")
}

// TestSettledOnceStored: a settled call is logged and counted once the
// store takes its step. A step the store refused first (NATS away) and
// then fenced (another node took the session meanwhile) is never said:
// it was said at its first refusal, and the quorum loss's node counted a
// call the node that took over settled too. One refused, then taken, is
// said once, then.
func TestSettledOnceStored(t *testing.T) {
	for _, later := range []error{engine.ErrFenced, nil} {
		t.Run(fmt.Sprintf("then %v", later), func(t *testing.T) {
			// The next try waits for the test: a flusher at work (kicked
			// by a step before) may try the refused step again at once.
			again := make(chan struct{})
			h, id, logs, m, err := answered(t, func(try int) error {
				if try == 1 {
					return errors.New("nats: timeout")
				}
				<-again
				return later
			})
			if err != nil {
				close(again)
				t.Fatalf("Answer with the store refusing its step: %v", err)
			}
			n, _ := settledSaid(logs, m)
			close(again)
			if n != 0 {
				t.Fatalf("said %d times while the store refused its step, want 0", n)
			}
			h.clock.Advance(time.Second) // the step is tried again
			if later != nil {
				recv(t, h.s.Done(), "the fenced session's leaving")
				if n, series := settledSaid(logs, m); n != 0 || series != 0 {
					t.Errorf("a step refused, then fenced, was said %d times and counted (%d series)", n, series)
				}
				return
			}
			h.waitFinished(id)
			// Said by the flusher once the pages have the frame: maybe a
			// moment after this page read it.
			waitUntil(t, "the settled call said", func() bool { n, _ := settledSaid(logs, m); return n > 0 })
			if n, _ := settledSaid(logs, m); n != 1 {
				t.Errorf("a step refused, then taken, was said %d times, want 1", n)
			}
		})
	}
}

// TestFencedAnswerIsNotTaken: a page's answer whose step the store fences
// (another node runs the session now) is not reported as taken: Answer
// returns ErrUnloaded, and the page resends it to the node that runs the
// session. Nor is the call logged or counted as settled: the node that
// runs the session settles it its own way (a node woken from a pause
// logged a call timed out that the node which took its session over had
// settled ok).
func TestFencedAnswerIsNotTaken(t *testing.T) {
	h, _, logs, m, err := answered(t, func(int) error { return engine.ErrFenced })
	if !errors.Is(err, engine.ErrUnloaded) {
		t.Fatalf("Answer of a fenced step: %v, want ErrUnloaded", err)
	}
	recv(t, h.s.Done(), "the fenced session's leaving")
	if n, _ := settledSaid(logs, m); n != 0 {
		t.Errorf("the fenced step's call was logged as settled:\n%s", logs.String())
	}
	if _, series := settledSaid(logs, m); series != 0 {
		t.Errorf("the fenced step's call was counted as settled (%d series)", series)
	}
}

// TestUnstoredStepsAtCloseAreLogged: a session that leaves memory (the
// gateway shuts down) while the store still refuses its steps loses them:
// its pages never saw them, and the log says so, with how many.
func TestUnstoredStepsAtCloseAreLogged(t *testing.T) {
	store := engine.NewMemoryStore()
	var full atomic.Bool
	store.Fail = func(string, engine.Batch) error {
		if full.Load() {
			return errors.New("no space left on device")
		}
		return nil
	}
	logs := &testlog.Buffer{}
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	full.Store(true)
	h.send("hi")
	h.transcript()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := h.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="the session leaves memory with steps the store refused: they are lost"`) ||
		!strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("the log does not say the refused steps are lost:\n%s", logs)
	}
}
