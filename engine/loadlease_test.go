package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
)

// TestLoadGivenUpKeepsItsLease: a load whose caller leaves while the
// resume step is being stored (a browser's fetch aborted, a slow store)
// still loads the session, and the session keeps its lease: the load gave
// the lease back under a session that ran on, and another node could take
// it and run the session too.
func TestLoadGivenUpKeepsItsLease(t *testing.T) {
	gate := &leaseGate{MemoryStore: engine.NewMemoryStore(), held: make(chan struct{}, 1)}
	r := &rig{t: t, clock: clock.NewFake(epoch), open: func() engine.Store { return gate }}
	w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
	m := callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))
	s1, _ := r.callThenStop(w, m)
	e := r.start(w, m)
	release := gate.hold()
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan error, 1)
	go func() {
		_, err := e.Load(ctx, s1.ID())
		loaded <- err
	}()
	recv(t, gate.held, "the resume step's append")
	cancel()
	close(release)
	if err := recv(t, loaded, "Load"); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Load given up: %v, want the session or context.Canceled", err)
	}
	waitUntil(t, "the session loaded all the same", func() bool { _, ok := e.Session(s1.ID()); return ok })
	if n := gate.releases(); n != 0 {
		t.Errorf("the lease was given back %d times under a session that runs", n)
	}
}

// leaseGate is a memory store with leases that count their releases, and
// whose appends wait while held.
type leaseGate struct {
	*engine.MemoryStore
	mu       sync.Mutex
	gate     chan struct{} // appends wait for it to close
	held     chan struct{} // an append waits
	released int
}

// hold holds the appends from now until the channel it returns closes,
// and counts the releases from now.
func (g *leaseGate) hold() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.released = make(chan struct{}), 0
	return g.gate
}

func (g *leaseGate) releases() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.released
}

func (g *leaseGate) Append(ctx context.Context, session string, b engine.Batch) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-gate
	}
	return g.MemoryStore.Append(ctx, session, b)
}

func (g *leaseGate) Own(context.Context, string, func()) (engine.Ownership, error) {
	return gateLease{g}, nil
}

type gateLease struct{ g *leaseGate }

func (l gateLease) Release(context.Context) error {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	l.g.released++
	return nil
}

// confirmOnPage starts an engine on r whose session has alice's page
// running a confirm call.
func confirmOnPage(t *testing.T, r *rig) (*testWorker, *fakeModel, *engine.Engine, *engine.Session, *reader) {
	t.Helper()
	w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
	m := callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))
	e := r.start(w, m)
	ctx := context.Background()
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0, "confirm")
	if err := p.page.Send(ctx, "delete my draft"); err != nil {
		t.Fatal(err)
	}
	p.until("tool.call", isType(engine.FrameToolCall))
	return w, m, e, s, p
}

// TestRestartWaitingCallSaidOnce: a client call that waited for a page
// when the gateway stopped is not said to wait again by the load: pages
// saw a second tool.leased naming no page, a change that did not happen.
func TestRestartWaitingCallSaidOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, e, s, p := confirmOnPage(t, r)
		p.page.Detach()
		var before []engine.Event
		waitUntil(t, "the call waiting for a page", func() bool {
			before = stored(t, r.store, s.ID())
			last := before[len(before)-1]
			return last.Type == engine.EventToolLeased && !strings.Contains(string(last.Frame), `"page"`)
		})
		stop(t, e)
		r.loaded(w, m, s.ID())
		if after := stored(t, r.store, s.ID()); len(after) != len(before) {
			t.Errorf("the load added %s to the journal, after %s", after[len(before)].Frame, before[len(before)-1].Frame)
		}
	})
}

// TestGracefulStopSaysTheCallWaits: a gateway stopped with SIGTERM closes
// its pages as it stops (Closing, then each page detaches): their calls do
// not move then, so pages were not told a call waits. Loaded again, the
// session says so, as after a crash: pages that resume saw the call held
// by a page that is gone (an outside audit: SIGTERM published no
// tool.leased naming no page, kill -9 did).
func TestGracefulStopSaysTheCallWaits(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, e, s, p := confirmOnPage(t, r)
		e.Closing()
		p.page.Detach()
		stop(t, e)
		r.loaded(w, m, s.ID())
		events := stored(t, r.store, s.ID())
		if ev := events[len(events)-1]; ev.Type != engine.EventToolLeased || strings.Contains(string(ev.Frame), `"page"`) {
			t.Errorf("the journal's last event after the load: %s, want tool.leased for call_1 naming no page", ev.Frame)
		}
	})
}

// TestResumeOfACopyFromALostRun: a page's copy of a session comes with the
// epoch of its session.opened. After a restart whose store lost the
// journal's tail, the turn runs again and its events take the lost ones'
// seqs: a page that saw those, resuming with after alone, was taken, its
// copy silently not the gateway's (an outside audit). Its copy is of the
// run before, and goes past what the journal held at the load: refused,
// so the SDK opens the session from its start. A copy of this run, one
// within what the journal held, or one that names no epoch, is taken.
func TestResumeOfACopyFromALostRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, s, before := hiThenStop(t, r)
		ctx := context.Background()
		stored := s.LastSeq()

		e2 := r.start(w, m)
		s2, err := e2.Load(ctx, s.ID())
		if err != nil {
			t.Fatal(err)
		}
		p2 := attach(t, s2, stored)
		now := epochOf(t, p2.until("session.opened", isType(engine.FrameSessionOpened)))
		if now == "" || now == before {
			t.Fatalf("epochs %q before the load and %q after, want two", before, now)
		}
		_ = p2.page.Send(ctx, "again")
		p2.until("the second reply", finalIdle(""))
		past := stored + 2 // as a page that saw events the store lost would say
		for _, tc := range []struct {
			name  string
			o     engine.AttachOptions
			taken bool
		}{
			{"a copy of the run before, past what the journal held", engine.AttachOptions{After: past, Epoch: before}, false},
			{"a copy of the run before, within it", engine.AttachOptions{After: stored, Epoch: before}, true},
			{"a copy of this run", engine.AttachOptions{After: past, Epoch: now}, true},
			{"a copy that names no epoch", engine.AttachOptions{After: past}, true},
		} {
			page, err := s2.Attach(ctx, tc.o)
			switch {
			case tc.taken && err != nil:
				t.Errorf("%s: %v, want it taken", tc.name, err)
			case !tc.taken && (err == nil || !strings.Contains(err.Error(), "when it was loaded")):
				t.Errorf("%s: %v, want it refused, saying the page's copy is of a run before", tc.name, err)
			}
			if page != nil {
				page.Detach()
			}
		}

		// Loaded once more (an unload, a deploy), the session still knows
		// the copy of the first run for one of events it lost: the second
		// run's events since did not make them the first's.
		bLast := s2.LastSeq()
		stop(t, e2)
		s3 := r.loaded(w, m, s.ID())
		for _, tc := range []struct {
			name  string
			o     engine.AttachOptions
			taken bool
		}{
			{"the first run's copy, after a second load", engine.AttachOptions{After: past, Epoch: before}, false},
			{"the second run's copy, whole", engine.AttachOptions{After: bLast, Epoch: now}, true},
		} {
			page, err := s3.Attach(ctx, tc.o)
			switch {
			case tc.taken && err != nil:
				t.Errorf("%s: %v, want it taken", tc.name, err)
			case !tc.taken && (err == nil || !strings.Contains(err.Error(), "when it was loaded")):
				t.Errorf("%s: %v, want it refused", tc.name, err)
			}
			if page != nil {
				page.Detach()
			}
		}
	})
}

// TestResumeOfACopyFromARunThatStoredNothing: a page opens a chat, and
// nothing happens in it before the chat leaves memory (its unload, a
// deploy): that run stored no step, so no state names its epoch. The
// page's copy, resumed at the next load, holds only what the journal held
// at that run's load, and is taken; it was refused as a copy holding
// events the store lost, held to the chat's first load (an outside soak:
// a needless replay of the whole chat, and a warning of lost data).
func TestResumeOfACopyFromARunThatStoredNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, s, _ := hiThenStop(t, r)
		ctx := context.Background()
		for _, say := range []string{"again", ""} {
			e := r.start(w, m)
			s2, err := e.Load(ctx, s.ID())
			if err != nil {
				t.Fatal(err)
			}
			p := attach(t, s2, s2.LastSeq())
			epoch := epochOf(t, p.until("session.opened", isType(engine.FrameSessionOpened)))
			if say != "" {
				_ = p.page.Send(ctx, say)
				p.until("the reply", finalIdle(""))
				stop(t, e)
				continue
			}
			last := s2.LastSeq()
			stop(t, e) // nothing happened in this run
			s3 := r.loaded(w, m, s.ID())
			page, err := s3.Attach(ctx, engine.AttachOptions{After: last, Epoch: epoch})
			if page != nil {
				page.Detach()
			}
			if err != nil {
				t.Errorf("a copy of a run that stored nothing, whole: %v; want it taken", err)
			}
			if page, err := s3.Attach(ctx, engine.AttachOptions{After: last + 2, Epoch: epoch}); err == nil {
				page.Detach()
				t.Error("a copy of a run that stored nothing, past the journal: taken; want it refused")
			}
		}
	})
}

// TestResumeOfACopyFromBeforeTheRunsKept: a copy of a run older than the
// loads the state keeps (16) is held to the least of what the journal held
// at every load since, those that left the window too: a session restored
// from a backup, then loaded 17 times, took a tab's copy from before the
// backup whose turns the restored journal never had (an outside audit's
// data lifecycle), where the docs promise a refusal, and a replay.
func TestResumeOfACopyFromBeforeTheRunsKept(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, s, before := hiThenStop(t, r)
		ctx := context.Background()
		held := s.LastSeq() // what the journal holds at the first load
		for i := range 17 {
			e := r.start(w, m)
			s2, err := e.Load(ctx, s.ID())
			if err != nil {
				t.Fatal(err)
			}
			p := attach(t, s2, s2.LastSeq())
			_ = p.page.Send(ctx, fmt.Sprintf("again %d", i))
			p.until("the reply", finalIdle(""))
			stop(t, e)
		}
		s3 := r.loaded(w, m, s.ID())
		page, err := s3.Attach(ctx, engine.AttachOptions{After: held + 2, Epoch: before})
		if page != nil {
			page.Detach()
		}
		if err == nil || !strings.Contains(err.Error(), "when it was loaded") {
			t.Errorf("a copy of the first run past what the journal held, 18 loads on: %v; want it refused", err)
		}
	})
}

// hiThenStop starts an engine on r, has alice's page say hi and get the
// reply, and stops the engine: the session is in the store alone. It
// returns the epoch of the page's session.opened too.
func hiThenStop(t *testing.T, r *rig) (*testWorker, *fakeModel, *engine.Session, string) {
	t.Helper()
	w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
	m := textModel()
	e := r.start(w, m)
	ctx := context.Background()
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0)
	epoch := epochOf(t, p.until("session.opened", isType(engine.FrameSessionOpened)))
	_ = p.page.Send(ctx, "hi")
	p.until("the reply", finalIdle(""))
	stop(t, e)
	return w, m, s, epoch
}

// epochOf is the epoch of the last frame of frames, a session.opened.
func epochOf(t *testing.T, frames []engine.Event) string {
	t.Helper()
	var opened engine.SessionOpenedFrame
	if err := json.Unmarshal(frames[len(frames)-1].Frame, &opened); err != nil {
		t.Fatal(err)
	}
	return opened.Epoch
}

// TestALoadStoresNothing: a session loaded, opened by a page that runs no
// tool, and let go again writes nothing to its journal, though this run of
// it has an epoch of its own, which its state keeps from its next step on.
func TestALoadStoresNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, r *rig) {
		w, m, s, _ := hiThenStop(t, r)
		ctx := context.Background()
		batches := func() int {
			t.Helper()
			b, err := r.store.Load(ctx, s.ID())
			if err != nil {
				t.Fatal(err)
			}
			return len(b)
		}
		for i := range 2 { // the second load reads a state with a run in it
			before := batches()
			e := r.start(w, m)
			s2, err := e.Load(ctx, s.ID())
			if err != nil {
				t.Fatal(err)
			}
			// A page that runs no tool comes and goes: nothing the
			// journal keeps changes.
			p2 := attach(t, s2, s2.LastSeq())
			p2.until("session.opened", isType(engine.FrameSessionOpened))
			p2.page.Detach()
			stop(t, e)
			if after := batches(); after != before {
				t.Errorf("load %d: the journal went from %d batches to %d, want none written", i+1, before, after)
			}
		}
	})
}
