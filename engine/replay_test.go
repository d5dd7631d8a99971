package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/store/jetstream"
)

// loadCounter is a memory store that counts its reads (Load and
// LoadFrom; froms the LoadFroms alone), fails them while fail is set,
// answers the next short of them with the first half of what it read (as
// a replica that lags may), and holds the first one after hold is set
// until release closes.
type loadCounter struct {
	*engine.MemoryStore
	loads   atomic.Int32
	froms   atomic.Int32
	from    atomic.Int64 // the last LoadFrom's
	fail    atomic.Bool
	short   atomic.Int32
	hold    chan struct{} // closed by the held read when it starts
	release chan struct{}
}

func (c *loadCounter) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	return c.read(func() ([]engine.Batch, error) { return c.MemoryStore.Load(ctx, session) })
}

func (c *loadCounter) LoadFrom(ctx context.Context, session string, from int64) ([]engine.Batch, error) {
	c.froms.Add(1)
	c.from.Store(from)
	return c.read(func() ([]engine.Batch, error) { return c.MemoryStore.LoadFrom(ctx, session, from) })
}

func (c *loadCounter) read(load func() ([]engine.Batch, error)) ([]engine.Batch, error) {
	c.loads.Add(1)
	if c.fail.Load() {
		return nil, errors.New("the disk is gone")
	}
	if hold := c.hold; hold != nil {
		c.hold = nil
		close(hold)
		<-c.release
	}
	batches, err := load()
	if err == nil && c.short.Add(-1) >= 0 {
		var events []engine.Event
		for _, b := range batches {
			events = append(events, b.Events...)
		}
		batches = []engine.Batch{{Events: events[:len(events)/2]}}
	}
	return batches, err
}

// holdNext makes the next Load wait until release closes; the channel it
// returns closes when that Load starts.
func (c *loadCounter) holdNext() <-chan struct{} {
	held := make(chan struct{})
	c.release = make(chan struct{})
	c.hold = held
	return held
}

// replayed attaches a page after `after` and checks its stream starts with
// session.opened and then the stored events after `after`, every one,
// in order, as store has them (a loadCounter's MemoryStore: the test's
// own read is not counted).
func replayed(t *testing.T, s *engine.Session, store engine.Store, after int64) {
	t.Helper()
	frames, _ := take(t, s, after)
	sameEvents(t, fmt.Sprintf("the replay after %d", after), frames[1:], stored(t, store, s.ID())[after:])
}

// forgetful is a harness whose session keeps as few events in memory as
// it can (ReplayBytes 1), on a store that counts its Loads, after turns
// user turns; opts' other fields are passed on.
func forgetful(t *testing.T, turns int, opts engine.Options) (*harness, *loadCounter) {
	t.Helper()
	return forgetfulOn(t, turns, opts, nil)
}

// forgetfulOn is forgetful with the session's store made from the
// loadCounter by wrap (nil: the loadCounter itself).
func forgetfulOn(t *testing.T, turns int, opts engine.Options, wrap func(*loadCounter) engine.Store) (*harness, *loadCounter) {
	t.Helper()
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	opts.Store, opts.ReplayBytes = store, 1
	if wrap != nil {
		opts.Store = wrap(store)
	}
	h := setup(t, &testWorker{}, textModel(), opts)
	chat(h, turns)
	return h, store
}

// sameEvents fails unless got is want, seq and frame, in order.
func sameEvents(t *testing.T, what string, got, want []engine.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i, ev := range got {
		if ev.Seq != want[i].Seq || string(ev.Frame) != string(want[i].Frame) {
			t.Fatalf("%s: event %d is seq %d %s, want seq %d %s", what, i, ev.Seq, ev.Frame, want[i].Seq, want[i].Frame)
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
// event all the same, with one read of the store, and one that resumes
// within them costs no read.
func TestReplayFromTheStore(t *testing.T) {
	m := metrics.New()
	h, store := forgetful(t, 10, engine.Options{Metrics: m})
	last := h.s.LastSeq()
	if last < 40 {
		t.Fatalf("10 turns made %d events", last)
	}
	for _, tc := range []struct {
		after int64
		loads int32
	}{{0, 1}, {1, 1}, {last / 2, 1}, {last - 5, 1}, {last - 1, 0}, {last, 0}} {
		before := store.loads.Load()
		replayed(t, h.s, store.MemoryStore, tc.after)
		if n := store.loads.Load() - before; n != tc.loads {
			t.Errorf("a replay after %d of %d read the store %d times, want %d", tc.after, last, n, tc.loads)
		}
	}
	// Each read is in gateway_replay_store_read_seconds.
	if n, _ := histogram(t, m, "gateway_replay_store_read_seconds"); n != uint64(store.loads.Load()) {
		t.Errorf("gateway_replay_store_read_seconds counted %d reads, the store had %d", n, store.loads.Load())
	}
}

// TestReplayWhileEventsLeaveMemory: a page's replay read from the store
// while the session goes on (its steps, or a model streaming) is read once,
// and has every event, then the live ones, with no gap: the session keeps
// what it stores meanwhile until the page has its replay.
func TestReplayWhileEventsLeaveMemory(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed %t", streamed), func(t *testing.T) { replayWhileEventsLeave(t, streamed) })
	}
}

func replayWhileEventsLeave(t *testing.T, streamed bool) {
	paused, resume := make(chan struct{}), make(chan struct{})
	streaming := model.Func(func(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Content != "stream" {
			return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
		}
		for i := range 200 {
			onDelta(fmt.Sprintf("piece %d ", i))
			if i == 99 {
				close(paused)
				<-resume
			}
		}
		return model.Response{Text: "streamed", StopReason: model.StopEndTurn}, nil
	})
	var opts engine.Options
	if streamed {
		opts.Models = model.ResolverFunc(func(string) (model.Model, error) { return streaming, nil })
	}
	h, store := forgetful(t, 3, opts)
	held := store.holdNext()
	type attached struct {
		page *engine.Page
		err  error
	}
	done := make(chan attached, 1)
	go func() {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0, Buffer: 10000})
		done <- attached{p, err}
	}()
	recv(t, held, "the replay's read of the store")
	// The session goes on meanwhile: the read holds only the page.
	if streamed {
		h.send("stream")
		recv(t, paused, "the model's first hundred pieces")
	} else {
		chat(h, 3)
	}
	close(store.release)
	got := recv(t, done, "Attach")
	if got.err != nil {
		t.Fatal(got.err)
	}
	defer got.page.Detach()
	if streamed {
		close(resume)
		h.waitIdle()
	}
	last := h.s.LastSeq()
	var frames []engine.Event
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for ev := range got.page.Frames(ctx) {
		if ev.Seq == 0 {
			continue // session.opened
		}
		frames = append(frames, ev)
		if ev.Seq == last {
			break
		}
	}
	sameEvents(t, "the replay and the live events", frames, stored(t, store.MemoryStore, h.s.ID()))
	if n := store.loads.Load(); n != 1 {
		t.Errorf("the store was read %d times for one replay, want once", n)
	}
}

// TestReplaysShareARead: pages that open a chat from its start while its
// journal is being read for another page's replay share that read.
func TestReplaysShareARead(t *testing.T) {
	h, store := forgetful(t, 3, engine.Options{})
	held := store.holdNext()
	const pages = 5
	done := make(chan []engine.Event, pages)
	attachFromStart := func() {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0})
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		defer p.Detach()
		done <- p.Take(nil)
	}
	go attachFromStart()
	recv(t, held, "the first replay's read of the store")
	for range pages - 1 {
		go attachFromStart()
	}
	waitUntil(t, "the other pages joining the read under way", func() bool { return h.s.ReplayReadJoined() == pages-1 })
	close(store.release)
	all := stored(t, store.MemoryStore, h.s.ID())
	for range pages {
		frames := recv(t, done, "a page's replay")
		if len(frames) == 0 {
			t.Fatal("a page's Attach failed")
		}
		sameEvents(t, "a page's replay", frames[1:], all)
	}
	if n := store.loads.Load(); n > 2 {
		t.Errorf("%d pages opening the chat at once read its journal %d times", pages, n)
	}
}

// TestReplayFromAStoreThatLags: a journal read for a replay that ends
// before the events it needs (a replica that lags) is read again, after a
// wait, and the replay is whole; one that stays short fails the attach as
// the store being unavailable, not the journal corrupt.
func TestReplayFromAStoreThatLags(t *testing.T) {
	for _, tc := range []struct {
		short   int32
		loads   int32
		failing bool
	}{{2, 3, false}, {100, 5, true}} {
		t.Run(fmt.Sprintf("short %d times", tc.short), func(t *testing.T) {
			h, store := forgetful(t, 4, engine.Options{})
			store.short.Store(tc.short)
			done := make(chan error, 1)
			go func() {
				p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0})
				if err == nil {
					p.Detach()
				}
				done <- err
			}()
			var err error
			for waiting := true; waiting; {
				select {
				case err = <-done:
					waiting = false
				case <-time.After(time.Millisecond):
					h.clock.Advance(100 * time.Millisecond)
				}
			}
			if tc.failing != (err != nil) || (err != nil && (!errors.Is(err, engine.ErrStoreUnavailable) || errors.Is(err, engine.ErrCorrupt))) {
				t.Errorf("Attach: %v; want it to fail %t, with ErrStoreUnavailable", err, tc.failing)
			}
			if n := store.loads.Load(); n != tc.loads {
				t.Errorf("the journal was read %d times, want %d", n, tc.loads)
			}
		})
	}
}

// TestReplayOfAnEndedSession: a page that opens an ended session from its
// start is refused at once, with nothing read.
func TestReplayOfAnEndedSession(t *testing.T) {
	h, store := forgetful(t, 2, engine.Options{})
	h.s.End(context.Background(), "done")
	recv(t, h.s.Done(), "the session's end")
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0}); !errors.Is(err, engine.ErrSessionClosed) {
		t.Errorf("Attach to an ended session: %v, want ErrSessionClosed", err)
	}
	if n := store.loads.Load(); n != 0 {
		t.Errorf("the store was read %d times", n)
	}
}

// TestReplayStoreFailing: a replay the store cannot read fails the attach
// with ErrStoreUnavailable and leaves no page behind; the session goes on,
// and the next attach, once the store reads again, gets its replay.
func TestReplayStoreFailing(t *testing.T) {
	h, store := forgetful(t, 2, engine.Options{})
	store.fail.Store(true)
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 0}); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Fatalf("Attach with the store failing its reads: %v, want ErrStoreUnavailable", err)
	}
	chat(h, 1)
	store.fail.Store(false)
	replayed(t, h.s, store.MemoryStore, 0)
}

// TestLoadedLongChatReplaysFromTheStore: a session loaded from its journal
// keeps only its latest events once a page has its replay; the next page
// that opens it from its start gets every event, from the store (memory and
// JetStream).
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
		for _, after := range []int64{0, 0, 7, last - 1} {
			replayed(t, s, r.store, after)
			if s.KeptFrom() < last-5 {
				t.Fatalf("after a replay the session keeps its events from %d of %d", s.KeptFrom(), last)
			}
		}
		checkJournal(t, r.store, s.ID())
	})
}

// copyingStore is a memory store whose Load hands out its own copies of
// what it keeps, as the JetStream store does: each batch is one buffer, its
// frames and state slices of it (a message as the store read it), so a
// loaded session that keeps a frame keeps its batch's buffer.
type copyingStore struct{ *engine.MemoryStore }

func (c copyingStore) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	batches, err := c.MemoryStore.Load(ctx, session)
	for i, b := range batches {
		var buf []byte
		for _, ev := range b.Events {
			buf = append(buf, ev.Frame...)
		}
		buf = append(buf, b.State...)
		events := make([]engine.Event, len(b.Events))
		at := 0
		for j, ev := range b.Events {
			events[j] = engine.Event{Seq: ev.Seq, Type: strings.Clone(ev.Type), Frame: buf[at : at+len(ev.Frame) : at+len(ev.Frame)]}
			at += len(ev.Frame)
		}
		batches[i] = engine.Batch{Events: events, Agent: b.Agent}
		if b.State != nil {
			batches[i].State = buf[at:]
		}
	}
	return batches, err
}

// BenchmarkLoadedLongChat is the memory a long chat takes once loaded from
// its journal and opened from its start by a page, which took its replay:
// longChat's 300 turns, about 7,200 events. kept-B/op is the heap the
// loaded session holds, after a GC, with the default Options.ReplayBytes
// and with every event kept (as before it).
func BenchmarkLoadedLongChat(b *testing.B) {
	ctx := context.Background()
	store := copyingStore{engine.NewMemoryStore()}
	id := longChat(b, store)
	for _, tc := range []struct {
		name string
		keep int
	}{{"default", 0}, {"every event", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			var kept uint64
			for b.Loop() {
				e := longChatEngine(b, store, tc.keep)
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

// longChatEngine is an engine on store whose model streams a reply in 20
// pieces; keep is its Options.ReplayBytes.
func longChatEngine(b *testing.B, store engine.Store, keep int) *engine.Engine {
	streamed := model.Func(func(_ context.Context, _ model.Request, onDelta func(string)) (model.Response, error) {
		var reply strings.Builder
		for i := range 20 {
			piece := fmt.Sprintf("piece %d of a reply streamed to the page. ", i)
			reply.WriteString(piece)
			onDelta(piece)
		}
		return model.Response{Text: reply.String(), StopReason: model.StopEndTurn}, nil
	})
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

// longChat writes a chat of 300 turns to store, each a reply streamed in
// 20 pieces (about 7,200 events), and returns its id.
func longChat(b *testing.B, store engine.Store) string {
	ctx := context.Background()
	e := longChatEngine(b, store, 0)
	defer func() { _ = e.Close(ctx) }()
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Attach(ctx, engine.AttachOptions{Buffer: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Detach()
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
	return s.ID()
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// chatOutOfMemory has a session of turns turns on a store that counts its
// reads, then a new engine on that store, which keeps 1 byte of events a
// session: the chat is in the store alone.
func chatOutOfMemory(t *testing.T, turns int) (*loadCounter, *engine.Engine, string) {
	t.Helper()
	store := &loadCounter{MemoryStore: engine.NewMemoryStore()}
	w := &testWorker{}
	h := setup(t, w, textModel(), engine.Options{Store: store, ReplayBytes: 1})
	chat(h, turns)
	if err := h.e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{Worker: w, Store: store, Logger: quiet(), Retain: -1, ReplayBytes: 1,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, e) })
	return store, e, h.s.ID()
}

// TestOpenedFromItsStartReadsTheJournalOnce: a chat out of memory that a
// page opens from its start (a chat picked from the list) is read from the
// store once, for the load and the replay both; once that page has its
// replay the session keeps only its latest events, and the next page that
// opens it from its start reads the store again.
func TestOpenedFromItsStartReadsTheJournalOnce(t *testing.T) {
	store, e, id := chatOutOfMemory(t, 6)
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
	replayed(t, s, store.MemoryStore, 0)
	if n := store.loads.Load() - before; n != 1+1 { // the replay's read and replayed's own
		t.Errorf("the next replay from the start read the store %d times, want 2 (with the test's own)", n-1)
	}
}

// BenchmarkLoadLongChatJetStream is the time a long chat takes to load
// from the JetStream store (the embedded server): longChat's 300 turns,
// about 7,200 events in 1,500 messages, 300 of them with a state.
func BenchmarkLoadLongChatJetStream(b *testing.B) {
	ctx := context.Background()
	store, err := jetstream.Open(ctx, jetstream.Options{DataDir: b.TempDir(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	id := longChat(b, store)
	for b.Loop() {
		e := longChatEngine(b, store, 0)
		if _, err := e.Load(ctx, id); err != nil {
			b.Fatal(err)
		}
		_ = e.Close(ctx)
	}
}

// TestAPageAheadReadsNothing: a page whose copy is refused (of a run
// before the load, past what the journal then held) is refused before
// the store is read for its replay, which it would not get.
func TestAPageAheadReadsNothing(t *testing.T) {
	store, e, id := chatOutOfMemory(t, 2)
	s, err := e.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	held := s.LastSeq()
	p, err := s.Attach(context.Background(), engine.AttachOptions{After: held})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), "more"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(hangGuard); s.KeptFrom() <= held+2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session keeps its events from %d, want past %d", s.KeptFrom(), held+2)
		}
	}
	before := store.loads.Load() + store.froms.Load()
	if _, err := s.Attach(context.Background(), engine.AttachOptions{After: held + 1, Epoch: "a-run-before"}); err == nil {
		t.Fatal("a copy of a run before, past what the journal held, was taken")
	}
	if n := store.loads.Load() + store.froms.Load() - before; n != 0 {
		t.Errorf("the refusal read the store %d times, want 0", n)
	}
}
