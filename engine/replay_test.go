package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
)

// loadCounter is a memory store that counts its Loads, fails them while
// fail is set, and holds the first one after hold is set until release
// closes.
type loadCounter struct {
	*engine.MemoryStore
	loads   atomic.Int32
	fail    atomic.Bool
	hold    chan struct{} // closed by the held Load when it starts
	release chan struct{}
}

func (c *loadCounter) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	c.loads.Add(1)
	if c.fail.Load() {
		return nil, errors.New("the disk is gone")
	}
	if hold := c.hold; hold != nil {
		c.hold = nil
		close(hold)
		<-c.release
	}
	return c.MemoryStore.Load(ctx, session)
}

// replayed attaches a page after `after` and checks its stream starts with
// session.opened and then the stored events after `after`, every one,
// in order.
func replayed(t *testing.T, s *engine.Session, store engine.Store, after int64) {
	t.Helper()
	frames, _ := take(t, s, after)
	all := stored(t, store, s.ID())
	want := all[after:]
	if len(frames)-1 != len(want) {
		t.Fatalf("after %d: %d events replayed, want %d (%d stored)", after, len(frames)-1, len(want), len(all))
	}
	for i, ev := range frames[1:] {
		if ev.Seq != want[i].Seq || string(ev.Frame) != string(want[i].Frame) {
			t.Fatalf("after %d: replayed event %d is seq %d %s, want seq %d %s", after, i, ev.Seq, ev.Frame, want[i].Seq, want[i].Frame)
		}
	}
}

// chat runs turns user turns on the harness's session.
func chat(h *harness, turns int) {
	for i := range turns {
		h.send(fmt.Sprintf("message %d", i))
		h.waitIdle()
	}
}

// TestReplayFromTheStore: a session keeps only its latest events in memory
// (Options.ReplayBytes); a page that resumes from before them gets every
// event all the same, read from the store, and one that resumes within
// them costs no read.
func TestReplayFromTheStore(t *testing.T) {
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store, ReplayBytes: 1})
	chat(h, 10)
	last := h.s.LastSeq()
	if last < 40 {
		t.Fatalf("10 turns made %d events", last)
	}
	for _, after := range []int64{0, 1, last / 2, last - 5} {
		replayed(t, h.s, store, after)
	}
	if n := store.loads.Load(); n == 0 {
		t.Fatal("the replays from the session's start read nothing from the store: it keeps every event in memory")
	}

	// The last turn's events are kept: resuming there reads nothing.
	before := store.loads.Load()
	for _, after := range []int64{last - 1, last} {
		replayed(t, h.s, store, after)
	}
	if n := store.loads.Load() - before - 2; n != 0 { // replayed's own two
		t.Errorf("resuming within the kept events read the store %d times", n)
	}
}

// TestReplayWhileEventsLeaveMemory: events that leave the session's memory
// while a page's replay is being read from the store are read too: no gap.
func TestReplayWhileEventsLeaveMemory(t *testing.T) {
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store, ReplayBytes: 1})
	chat(h, 3)
	held := make(chan struct{})
	store.release = make(chan struct{})
	store.hold = held
	type attached struct {
		frames []engine.Event
		err    error
	}
	done := make(chan attached, 1)
	go func() {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0})
		if err != nil {
			done <- attached{err: err}
			return
		}
		defer p.Detach()
		done <- attached{frames: p.Take(nil)}
	}()
	recv(t, held, "the replay's read of the store")
	// The session goes on meanwhile: the read holds only the page.
	chat(h, 3)
	close(store.release)
	got := recv(t, done, "Attach")
	if got.err != nil {
		t.Fatal(got.err)
	}
	all := stored(t, store, h.s.ID())
	if len(got.frames)-1 != len(all) {
		t.Fatalf("%d events replayed, %d stored", len(got.frames)-1, len(all))
	}
	for i, ev := range got.frames[1:] {
		if ev.Seq != int64(i+1) {
			t.Fatalf("replayed event %d has seq %d", i, ev.Seq)
		}
	}
	if n := store.loads.Load(); n < 2 {
		t.Errorf("the store was read %d times: the events that left memory during the first read were not read", n)
	}
}

// TestReplayStoreFailing: a replay the store cannot read fails the attach
// with ErrStoreUnavailable and leaves no page behind; the session goes on,
// and the next attach, once the store reads again, gets its replay.
func TestReplayStoreFailing(t *testing.T) {
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	h := setup(t, &testWorker{}, textModel(), engine.Options{Store: store, ReplayBytes: 1})
	chat(h, 2)
	store.fail.Store(true)
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0}); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("Attach with the store failing its reads: %v, want ErrStoreUnavailable", err)
	}
	chat(h, 1)
	store.fail.Store(false)
	replayed(t, h.s, store, 0)
}

// TestLoadedLongChatReplaysFromTheStore: a session loaded from its journal
// keeps only its latest events; a page that opens it from its start gets
// every event, from the store (memory and JetStream).
func TestLoadedLongChatReplaysFromTheStore(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		r.replay = 1
		w, m := &testWorker{}, textModel()
		e := r.start(w, m)
		s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		for i := range 8 {
			if err := p.page.Send(context.Background(), fmt.Sprintf("message %d", i)); err != nil {
				t.Fatal(err)
			}
			p.until("the turn's end", finalIdle("done"))
		}
		stop(t, e)
		s = r.loaded(w, m, s.ID())
		last := s.LastSeq()
		for _, after := range []int64{0, 7, last - 1} {
			replayed(t, s, r.store, after)
		}
		checkJournal(t, r.store, s.ID())
	})
}

// copyingStore is a memory store whose Load hands out copies of what it
// keeps, as a store that reads its journals from elsewhere (JetStream) does:
// what a loaded session holds is then its own, not shared with the store.
type copyingStore struct{ *engine.MemoryStore }

func (c copyingStore) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	batches, err := c.MemoryStore.Load(ctx, session)
	for i, b := range batches {
		events := make([]engine.Event, len(b.Events))
		for j, ev := range b.Events {
			events[j] = engine.Event{Seq: ev.Seq, Type: strings.Clone(ev.Type), Frame: bytes.Clone(ev.Frame)}
		}
		batches[i] = engine.Batch{Events: events, State: bytes.Clone(b.State), Agent: b.Agent}
	}
	return batches, err
}

// BenchmarkLoadedLongChat is the memory a long chat takes once loaded from
// its journal and opened from its start by a page, which took its replay:
// 300 turns, each a reply streamed in 20 pieces, about 7,200 events.
// kept-B/op is the heap the loaded session holds, after a GC, with the
// default Options.ReplayBytes and with every event kept (as before it).
func BenchmarkLoadedLongChat(b *testing.B) {
	ctx := context.Background()
	streamed := model.Func(func(_ context.Context, _ model.Request, onDelta func(string)) (model.Response, error) {
		var reply strings.Builder
		for i := range 20 {
			piece := fmt.Sprintf("piece %d of a reply streamed to the page. ", i)
			reply.WriteString(piece)
			onDelta(piece)
		}
		return model.Response{Text: reply.String(), StopReason: model.StopEndTurn}, nil
	})
	store := copyingStore{engine.NewMemoryStore()}
	start := func(keep int) *engine.Engine {
		e, err := engine.New(engine.Options{Worker: engine.WorkerFunc(func(_ context.Context, req engine.DecideRequest) (engine.Decision, error) {
			if _, ok := req.Trigger.(engine.SessionStart); ok {
				return engine.Decision{Agent: &engine.AgentConfig{Model: "fake-model"}}, nil
			}
			return req.Proposed, nil
		}), Store: store, Logger: quiet(), Retain: -1, ReplayBytes: keep,
			Models: model.ResolverFunc(func(string) (model.Model, error) { return streamed, nil })})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	e := start(0)
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Attach(ctx, engine.AttachOptions{Buffer: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	idles := 0 // session.start's, then a turn's each
	for i := range 300 {
		if err := p.Send(ctx, fmt.Sprintf("message %d", i)); err != nil {
			b.Fatal(err)
		}
		for idles < i+2 {
			<-p.Ready()
			for _, ev := range p.Take(nil) {
				if ev.Type == engine.EventSessionIdle {
					idles++
				}
			}
		}
	}
	_ = e.Close(ctx)
	id := s.ID()
	for _, tc := range []struct {
		name string
		keep int
	}{{"default", 0}, {"every event", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			var kept uint64
			for b.Loop() {
				e := start(tc.keep)
				before := heapAlloc()
				s, err := e.Load(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				// A page opens it from its start and has its replay.
				p, err := s.Attach(ctx, engine.AttachOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if replay := p.Take(nil); len(replay) < 7000 {
					b.Fatalf("the chat has %d events", len(replay))
				}
				kept += heapAlloc() - before
				p.Detach()
				_ = e.Close(ctx)
			}
			b.ReportMetric(float64(kept)/float64(b.N), "kept-B/op")
		})
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestOpenedFromItsStartReadsTheJournalOnce: a chat out of memory that a
// page opens from its start (a chat picked from the list) is read from the
// store once, for the load and the replay both; once that page has its
// replay the session keeps only its latest events, and the next page that
// opens it from its start reads the store again.
func TestOpenedFromItsStartReadsTheJournalOnce(t *testing.T) {
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	w := &testWorker{}
	h := setup(t, w, textModel(), engine.Options{Store: store, ReplayBytes: 1})
	chat(h, 6)
	id := h.s.ID()
	if err := h.e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	e, err := engine.New(engine.Options{Worker: w, Store: store, Logger: quiet(), Retain: -1, ReplayBytes: 1,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, e) })
	before := store.loads.Load()
	s, err := e.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attach(context.Background(), engine.AttachOptions{After: 0}); err != nil {
		t.Fatal(err)
	}
	if n := store.loads.Load() - before; n != 1 {
		t.Errorf("loading the chat and replaying it from its start read the store %d times, want 1", n)
	}
	if s.KeptFrom() <= 1 {
		t.Errorf("after the replay the session still keeps every event (from %d)", s.KeptFrom())
	}
	replayed(t, s, store, 0)
	if n := store.loads.Load() - before; n != 1+2 { // the replay's read and replayed's own
		t.Errorf("the next replay from the start read the store %d times, want 2 (with the test's own)", n-1)
	}
}
