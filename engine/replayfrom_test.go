package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// loadOnly is a store that reads journals from their start alone: it
// hides its store's LoadFrom.
type loadOnly struct{ engine.Store }

// TestReplayReadsWhatThePageLacks: a page that resumes before the events
// the session keeps reads the journal from the event it lacks
// (engine.JournalFrom), not from the start; one that opens the chat from
// its start reads it whole; a store without LoadFrom is read whole, and
// every replay is the same.
func TestReplayReadsWhatThePageLacks(t *testing.T) {
	for _, from := range []bool{true, false} {
		name := map[bool]string{true: "a store that reads from an event", false: "a store that reads from the start"}[from]
		t.Run(name, func(t *testing.T) {
			h, store := forgetful(t, 10, engine.Options{})
			if !from {
				h, store = forgetfulOn(t, 10, engine.Options{}, func(c *loadCounter) engine.Store { return loadOnly{c} })
			}
			last := h.s.LastSeq()
			for _, after := range []int64{0, 1, last / 2, last - 5} {
				loads, froms := store.loads.Load(), store.froms.Load()
				replayed(t, h.s, store.MemoryStore, after)
				if n := store.loads.Load() - loads; n != 1 {
					t.Errorf("a replay after %d of %d read the store %d times, want once", after, last, n)
				}
				wantFrom := from && after > 0
				if n := store.froms.Load() - froms; (n == 1) != wantFrom {
					t.Errorf("a replay after %d of %d read with LoadFrom %d times, want %t", after, last, n, wantFrom)
				}
				if got := store.from.Load(); wantFrom && got != after+1 {
					t.Errorf("a replay after %d read from event %d, want %d", after, got, after+1)
				}
			}
		})
	}
}

// TestReplaysShareAnEarlierRead: a page that resumes while the journal is
// read for a replay from an earlier event shares that read; one that
// resumes from before it reads on its own. Each gets its own replay.
func TestReplaysShareAnEarlierRead(t *testing.T) {
	h, store := forgetful(t, 6, engine.Options{})
	last := h.s.LastSeq()
	all := stored(t, store.MemoryStore, h.s.ID())
	held := store.holdNext()
	done := make(chan error, 3)
	resume := func(after int64) {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: after})
		if err != nil {
			done <- err
			return
		}
		defer p.Detach()
		frames := p.Take(nil)
		if len(frames) == 0 || len(frames)-1 != len(all)-int(after) {
			done <- errors.New("a replay of the wrong length")
			return
		}
		for i, ev := range frames[1:] {
			if ev.Seq != all[int(after)+i].Seq || string(ev.Frame) != string(all[int(after)+i].Frame) {
				done <- errors.New("a replay with the wrong events")
				return
			}
		}
		done <- nil
	}
	go resume(last / 2)
	recv(t, held, "the first replay's read of the store")
	go resume(last/2 + 3)
	waitUntil(t, "the later page joining the read under way", func() bool { return h.s.ReplayReadJoined() == 1 })
	resume(last / 4) // reads on its own, while the first is held
	if err := recv(t, done, "the earliest page's replay"); err != nil {
		t.Fatal(err)
	}
	close(store.release)
	for range 2 {
		if err := recv(t, done, "a page's replay"); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.loads.Load(); n != 2 {
		t.Errorf("three pages resuming from two points read the journal %d times, want twice", n)
	}
}

// startsLate is a store whose LoadFrom starts past the event it was asked
// for, as a broken one might.
type startsLate struct{ *loadCounter }

func (s startsLate) LoadFrom(ctx context.Context, session string, from int64) ([]engine.Batch, error) {
	return s.MemoryStore.LoadFrom(ctx, session, from+1)
}

// TestReplayFromAStoreThatStartsLate: a journal read from an event that
// comes without it fails the attach as damage, never as a replay with a
// gap.
func TestReplayFromAStoreThatStartsLate(t *testing.T) {
	h, _ := forgetfulOn(t, 3, engine.Options{}, func(c *loadCounter) engine.Store { return startsLate{c} })
	if _, err := h.s.Attach(context.Background(), engine.AttachOptions{After: 2}); !errors.Is(err, engine.ErrCorrupt) {
		t.Errorf("Attach from a journal read that starts past its event: %v, want ErrCorrupt", err)
	}
}

// gated holds every Load and LoadFrom until its gate closes, counting them.
type gated struct {
	*loadCounter
	gate         chan struct{}
	whole, froms atomic.Int32
}

func (g *gated) Load(ctx context.Context, session string) ([]engine.Batch, error) {
	g.whole.Add(1)
	<-g.gate
	return g.MemoryStore.Load(ctx, session)
}

func (g *gated) LoadFrom(ctx context.Context, session string, from int64) ([]engine.Batch, error) {
	g.froms.Add(1)
	<-g.gate
	return g.MemoryStore.LoadFrom(ctx, session, from)
}

// TestWholeReadsShareWhileALaterOneRuns: pages that open the chat from
// its start while a read from later on is under way (a page that resumes
// near the end) share one read of the whole journal (many tabs restored
// at once, a deploy that reconnects every page).
func TestWholeReadsShareWhileALaterOneRuns(t *testing.T) {
	g := &gated{gate: make(chan struct{})}
	h, _ := forgetfulOn(t, 6, engine.Options{}, func(c *loadCounter) engine.Store { g.loadCounter = c; return g })
	last := h.s.LastSeq()
	done := make(chan error, 4)
	resume := func(after int64) {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: after})
		if err == nil {
			p.Detach()
		}
		done <- err
	}
	go resume(last / 2)
	waitUntil(t, "the later read", func() bool { return g.froms.Load() == 1 })
	for range 3 {
		go resume(0)
	}
	// Each of the three either reads or joins a read under way.
	waitUntil(t, "the three pages reading or joining", func() bool { return int(g.whole.Load())+h.s.ReplayReadJoined() == 3 })
	close(g.gate)
	for range 4 {
		if err := recv(t, done, "a replay"); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.whole.Load(); n != 1 {
		t.Errorf("three pages opening the chat from its start read it whole %d times, want once", n)
	}
}

// TestAShortReplayDoesNotWaitForAWholeRead: a page that lacks its chat's
// last few events, while the chat's whole journal is being read for a page
// that opens it from its start, reads its few on its own rather than wait
// for the whole read; the whole read stays the one later pages share.
func TestAShortReplayDoesNotWaitForAWholeRead(t *testing.T) {
	h, store := forgetful(t, 10, engine.Options{})
	last := h.s.LastSeq()
	all := stored(t, store.MemoryStore, h.s.ID())
	held := store.holdNext()
	release := sync.OnceFunc(func() { close(store.release) })
	t.Cleanup(release) // a failing test lets the whole read go too
	replay := func(after int64, to chan<- []engine.Event) {
		p, err := h.s.Attach(context.Background(), engine.AttachOptions{After: after})
		if err != nil {
			t.Error(err)
			to <- nil
			return
		}
		defer p.Detach()
		to <- p.Take(nil)
	}
	whole, short := make(chan []engine.Event, 1), make(chan []engine.Event, 1)
	go replay(0, whole)
	recv(t, held, "the whole read")
	go replay(last-5, short)
	frames := recv(t, short, "the short replay, while the whole read is held")
	if len(frames) == 0 {
		t.FailNow()
	}
	sameEvents(t, "the short replay", frames[1:], all[last-5:])
	if n := store.froms.Load(); n != 1 {
		t.Errorf("the short replay read the store with LoadFrom %d times, want once", n)
	}
	release()
	if frames := recv(t, whole, "the whole replay"); len(frames) > 0 {
		sameEvents(t, "the whole replay", frames[1:], all)
	}
}
