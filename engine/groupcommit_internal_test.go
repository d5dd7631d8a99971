package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// gatedStore holds each Append until the test lets it through, and keeps
// what it was given.
type gatedStore struct {
	*MemoryStore
	entered chan Batch    // an Append started, with its batch
	release chan struct{} // lets one Append through
	fail    chan error    // when it has one, the next Append returns it instead
}

func newGatedStore() *gatedStore {
	return &gatedStore{MemoryStore: NewMemoryStore(), entered: make(chan Batch, 100), release: make(chan struct{}), fail: make(chan error, 1)}
}

func (g *gatedStore) Append(ctx context.Context, session string, b Batch) error {
	g.entered <- b
	<-g.release
	select {
	case err := <-g.fail:
		return err
	default:
	}
	return g.MemoryStore.Append(ctx, session, b)
}

// next waits for the next Append to start and returns its batch.
func (g *gatedStore) next(t *testing.T) Batch {
	t.Helper()
	select {
	case b := <-g.entered:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no Append started")
		return Batch{}
	}
}

// newGatedLog is a session's log on store, as slow as a store that needs
// flushers (lastTook), with one page.
func newGatedLog(store Store) (*eventLog, *Page, *sync.WaitGroup) {
	var wg sync.WaitGroup
	l := &eventLog{session: "s", store: store, logger: slog.New(slog.DiscardHandler), pages: map[*Page]struct{}{},
		spawn: func(f func()) { wg.Go(f) }, lastTook: time.Second}
	p := &Page{ready: make(chan struct{}, 1), done: make(chan struct{}), limit: 1 << 20}
	l.pages[p] = struct{}{}
	return l, p, &wg
}

func seqsOf(events []Event) []int64 {
	var out []int64
	for _, ev := range events {
		out = append(out, ev.Seq)
	}
	return out
}

func publishDelta(t *testing.T, l *eventLog, text string) {
	t.Helper()
	if _, err := l.publish(EventModelDelta, "", ModelDeltaEvent{Text: text}); err != nil {
		t.Fatal(err)
	}
}

// Deltas published while the store is taking one are not held up by it,
// and go to the store together in the next Append, then to the page in
// order; the step that ends the model turn joins them.
func TestDeltasGoToTheStoreTogether(t *testing.T) {
	store := newGatedStore()
	l, p, wg := newGatedLog(store)

	publishDelta(t, l, "a") // a flusher takes it; the store holds it
	if b := store.next(t); len(b.Events) != 1 || b.Events[0].Seq != 1 {
		t.Fatalf("the first Append: %v", seqsOf(b.Events))
	}
	for _, text := range []string{"b", "c", "d"} {
		publishDelta(t, l, text) // returns while the store still holds "a"
	}
	l.begin()
	if _, err := l.publish(EventModelFinished, "", ModelFinishedEvent{StopReason: "end_turn"}); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		_, err := l.commit(json.RawMessage(`{"v":1}`), false, false)
		committed <- err
	}()
	select {
	case err := <-committed:
		t.Fatalf("the step's commit returned (%v) before the store took it", err)
	case <-time.After(20 * time.Millisecond):
	}

	store.release <- struct{}{}
	b := store.next(t)
	if got := seqsOf(b.Events); len(got) != 4 || got[0] != 2 || got[3] != 5 || string(b.State) != `{"v":1}` {
		t.Fatalf("the second Append: events %v, state %s; want 2..5 and the step's state", got, b.State)
	}
	store.release <- struct{}{}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	close(store.release) // a third Append would pass, and be counted below
	wg.Wait()
	if got := seqsOf(p.queue); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("the page got %v, want 1..5", got)
	}
	if n := len(store.entered); n != 0 {
		t.Errorf("%d more Appends, want the two", n)
	}
	if got := storedSeqs(t, store, "s"); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("the journal has %v, want 1..5", got)
	}
}

// storedSeqs is the seqs of the events in session's journal.
func storedSeqs(t *testing.T, store Store, session string) []int64 {
	t.Helper()
	batches, err := store.Load(context.Background(), session)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, b := range batches {
		seqs = append(seqs, seqsOf(b.Events)...)
	}
	return seqs
}

// Two steps never share an Append: each one's state is whole only with the
// batches before it.
func TestStepsAreNotCombined(t *testing.T) {
	store := newGatedStore()
	l, _, wg := newGatedLog(store)
	store.fail <- ErrStoreUnavailable
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.begin()
		_, _ = l.publish(EventMessage, "", MessageEvent{Message: Message{Role: "user", Content: "one"}})
		if _, err := l.commit(json.RawMessage(`{"v":1,"agent":{}}`), true, false); err == nil {
			t.Error("the first step's commit: no error from a refusing store")
		}
		l.begin()
		_, _ = l.publish(EventMessage, "", MessageEvent{Message: Message{Role: "user", Content: "two"}})
		if _, err := l.commit(json.RawMessage(`{"v":1}`), false, false); err != nil {
			t.Errorf("the second step's commit: %v", err)
		}
	}()
	store.next(t)
	store.release <- struct{}{} // refused
	for i, want := range []string{`{"v":1,"agent":{}}`, `{"v":1}`} {
		b := store.next(t)
		if len(b.Events) != 1 || b.Events[0].Seq != int64(i+1) || string(b.State) != want {
			t.Errorf("Append %d: events %v, state %s; want event %d and %s", i+1, seqsOf(b.Events), b.State, i+1, want)
		}
		store.release <- struct{}{}
	}
	<-done
	wg.Wait()
}

// A model that streams faster than the store takes its deltas is held up
// once more than maxWaiting batches are pending (the one being stored
// among them); close and settle leave nothing appending.
func TestDeltasWaitForASlowStore(t *testing.T) {
	store := newGatedStore()
	l, _, wg := newGatedLog(store)
	published := make(chan int, maxWaiting+10)
	go func() {
		for i := range maxWaiting + 10 {
			_, _ = l.publish(EventModelDelta, "", ModelDeltaEvent{Text: "x"})
			published <- i
		}
		close(published)
	}()
	store.next(t) // the first deltas (as many as came before the flusher looked), held
	deadline := time.After(10 * time.Second)
	for n := 0; n < maxWaiting; {
		select {
		case <-published:
			n++
		case <-deadline:
			t.Fatalf("%d deltas published while the store held the first", n)
		}
	}
	select {
	case i := <-published:
		t.Fatalf("delta %d published with more than %d batches pending", i, maxWaiting)
	case <-time.After(20 * time.Millisecond):
	}
	go func() {
		for range store.entered {
			store.release <- struct{}{}
		}
	}()
	store.release <- struct{}{}
	for range published {
	}
	l.close(ErrSessionClosed)
	l.settle()
	if l.flushing || l.kicked || len(l.pending) != 0 {
		t.Errorf("after settle: flushing %v, kicked %v, %d batches waiting", l.flushing, l.kicked, len(l.pending))
	}
	wg.Wait()
	close(store.entered)
	if got := l.events.len(); got != maxWaiting+10 {
		t.Errorf("%d events stored, want %d", got, maxWaiting+10)
	}
}

// While the store is fast, a delta's publisher stores it itself: no
// flusher, and it is stored when publish returns.
func TestDeltasOnAFastStore(t *testing.T) {
	store := NewMemoryStore()
	spawned := 0
	l := &eventLog{session: "s", store: store, logger: slog.New(slog.DiscardHandler), pages: map[*Page]struct{}{},
		spawn: func(f func()) { spawned++; go f() }}
	for _, text := range []string{"a", "b"} {
		l.lastTook = 0 // as fast as it is (a loaded machine may measure more)
		publishDelta(t, l, text)
	}
	if spawned != 0 {
		t.Errorf("%d flushers started on a fast store", spawned)
	}
	if got := storedSeqs(t, store, "s"); len(got) != 2 {
		t.Errorf("events %v stored when publish returned, want 1 and 2", got)
	}
}

// combine takes deltas up to the step after them, never two steps, and no
// more than maxCombined bytes of frames unless one batch alone is larger.
func TestCombine(t *testing.T) {
	delta := func(size int) pendingBatch {
		return pendingBatch{items: []pendingItem{{ev: Event{Frame: make(json.RawMessage, size)}}}}
	}
	step := func(size int) pendingBatch {
		b := delta(size)
		b.state = json.RawMessage(`{"v":1}`)
		return b
	}
	for _, tc := range []struct {
		name    string
		pending []pendingBatch
		want    int
		state   bool
	}{
		{"deltas and the step after them", []pendingBatch{delta(100), delta(100), step(100), delta(100)}, 3, true},
		{"two steps", []pendingBatch{step(100), step(100)}, 1, true},
		{"deltas past the bound", []pendingBatch{delta(maxCombined / 2), delta(maxCombined / 2), delta(1)}, 2, false},
		{"one batch past the bound", []pendingBatch{delta(maxCombined + 1), delta(1)}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &eventLog{pending: tc.pending}
			n, batch := l.combine()
			if n != tc.want || len(batch.Events) != tc.want || (batch.State != nil) != tc.state {
				t.Errorf("combine took %d batches (%d events, state %s), want %d, state %v", n, len(batch.Events), batch.State, tc.want, tc.state)
			}
		})
	}
}

// blockingHandler is a log that stops at its first record until released:
// a log written to a full pipe or a slow disk.
type blockingHandler struct {
	slog.Handler
	entered chan struct{}
	release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.entered <- struct{}{}
	<-h.release
	return nil
}

// A settled call's log line is written with the log's lock released: a log
// that blocks holds up the step that settled the call, not the model's
// deltas to the pages.
func TestSettledNoteHoldsNoPublisher(t *testing.T) {
	l, p, _ := newGatedLog(NewMemoryStore())
	l.spawn = nil // publishers store their own deltas
	h := &blockingHandler{Handler: slog.DiscardHandler, entered: make(chan struct{}), release: make(chan struct{})}
	s := &Session{e: &Engine{}}
	l.begin()
	if _, err := l.publish(EventToolFinished, "", ToolFinishedEvent{ID: "c1", OK: true, Name: "echo", Result: "1"}); err != nil {
		t.Fatal(err)
	}
	l.note(settledNote{s: s, logger: slog.New(h), id: "c1", name: "echo", ok: true, attempt: 1})
	committed := make(chan error, 1)
	go func() {
		_, err := l.commit([]byte(`{"v":1}`), false, false)
		committed <- err
	}()
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the settled call was never logged")
	}
	published := make(chan error, 1)
	go func() {
		_, err := l.publish(EventModelDelta, "", ModelDeltaEvent{Text: "next"})
		published <- err
	}()
	waited := false
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("a delta waited for the settled call's log line")
		waited = true
	}
	close(h.release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if waited {
		<-published
	}
	var types []string
	for _, ev := range p.queue {
		types = append(types, ev.Type)
	}
	if len(types) != 2 || types[0] != EventToolFinished || types[1] != EventModelDelta {
		t.Errorf("the page got %v, want the tool.finished then the delta", types)
	}
}
