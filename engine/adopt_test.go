package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/clienttools/gateway/testlog"
)

// feedReads is a node's store that keeps what each read of its summary
// feed returned, and the cursor each started from.
type feedReads struct {
	*jetstream.Store
	mu      sync.Mutex
	reads   []engine.Changes
	cursors []uint64
	// cut, when set, is what the next read returns instead of the
	// store's, with an error: a read that failed part way.
	cut *engine.Changes
	// owns counts the leases the node tried to take, by session.
	owns map[string]int
	// down, when set, fails every read: a store that does not answer.
	down error
	// readOnly, when set, fails every write probe: a cluster without its
	// quorum, whose replicas still answer reads.
	readOnly error
}

func (f *feedReads) ProbeWrite(ctx context.Context) error {
	f.mu.Lock()
	err := f.readOnly
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.ProbeWrite(ctx)
}

func (f *feedReads) Own(ctx context.Context, session string, lost func()) (engine.Ownership, error) {
	f.mu.Lock()
	if f.owns == nil {
		f.owns = map[string]int{}
	}
	f.owns[session]++
	f.mu.Unlock()
	return f.Store.Own(ctx, session, lost)
}

func (f *feedReads) SummariesChanged(ctx context.Context, cursor uint64) (engine.Changes, error) {
	f.mu.Lock()
	cut, down := f.cut, f.down
	f.cut = nil
	f.mu.Unlock()
	ch, err := engine.Changes{}, error(nil)
	if down != nil {
		err = down
	} else if cut != nil {
		ch, err = *cut, errors.New("the server went away part way")
	} else {
		ch, err = f.Store.SummariesChanged(ctx, cursor)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, ch)
	f.cursors = append(f.cursors, cursor)
	return ch, err
}

func (f *feedReads) all() []engine.Changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.Changes(nil), f.reads...)
}

// lookNodes is a NATS server that nodes' stores share, and the engines
// the look's tests start on them: node A runs a session, node B looks.
type lookNodes struct {
	t      *testing.T
	url    string
	ttl    time.Duration
	w      *testWorker
	m      *fakeModel
	logger *slog.Logger // the engines'; nil: quiet
}

func newLookNodes(t *testing.T, ttl time.Duration) *lookNodes {
	w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
	w.agent.Model = "fake-model"
	return &lookNodes{t: t, url: natstest.Server(t, nil), ttl: ttl, w: w, m: callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))}
}

func (n *lookNodes) node(name string) *jetstream.Store {
	n.t.Helper()
	s, err := jetstream.Open(context.Background(), jetstream.Options{URL: n.url, Node: name, LeaseTTL: n.ttl, Logger: quiet()})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = s.Close() })
	return s
}

// start starts an engine on store, looking every adopt (0: never).
func (n *lookNodes) start(store engine.Store, clk *clock.Fake, adopt time.Duration) *engine.Engine {
	n.t.Helper()
	logger := n.logger
	if logger == nil {
		logger = quiet()
	}
	e, err := engine.New(engine.Options{
		Worker: n.w, Models: model.ResolverFunc(func(string) (model.Model, error) { return n.m, nil }),
		Store: store, Clock: clk, Logger: logger, Retain: -1, Rand: half, Adopt: adopt,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		_ = e.Close(ctx) // a node whose store the test closed fails to
	})
	return e
}

// callInFlight opens a session on e and runs it until its browser call is
// in flight: the session is busy.
func callInFlight(t *testing.T, e *engine.Engine) *engine.Session {
	t.Helper()
	s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0, "confirm")
	if err := p.page.Send(context.Background(), "delete my draft"); err != nil {
		t.Fatal(err)
	}
	p.until("tool.call", isType(engine.FrameToolCall))
	return s
}

// look lets the adopter of the engine on clk, whose store is b, run once
// more.
func look(t *testing.T, b *feedReads, clk *clock.Fake) {
	t.Helper()
	n := len(b.all())
	for deadline := time.Now().Add(hangGuard); len(b.all()) == n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("node B did not look")
		}
		clk.Advance(100 * time.Millisecond) // its next look, once it armed it
	}
}

// TestLookReadsWhatChanged: a node's look for sessions no node runs reads
// every summary at its first look and each hour, and in between only those
// written since the look before: with 2,000 idle sessions kept, the looks
// after the first read a few summaries, and still take over a session
// whose node stopped while its browser call was in flight.
func TestLookReadsWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 summaries on a NATS server")
	}
	ctx := context.Background()
	nodes := newLookNodes(t, 2*time.Second)
	a := nodes.node("node-a")
	const kept = 2000
	for i := range kept {
		if err := a.Summarize(ctx, engine.Summary{ID: fmt.Sprintf("kept-%d", i), Owner: "bob", Created: epoch, Updated: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	b := &feedReads{Store: nodes.node("node-b")}
	clockB := clock.NewFake(epoch)
	eb := nodes.start(b, clockB, time.Second)
	look(t, b, clockB)
	if first := b.all()[0]; !first.Whole || len(first.Summaries) < kept {
		t.Fatalf("the first look read %d summaries (whole %t), want every one of the %d kept", len(first.Summaries), first.Whole, kept)
	}

	// Node A runs a session until its browser call is in flight, and
	// stops: the session, busy, waits in the store with no lease.
	ea := nodes.start(a, clock.NewFake(epoch), 0)
	s := callInFlight(t, ea)
	stop(t, ea)

	for deadline := time.Now().Add(hangGuard); ; {
		if _, loaded := eb.Session(s.ID()); loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node B never took the stopped node's busy session over")
		}
		look(t, b, clockB)
	}
	for i, ch := range b.all()[1:] {
		if ch.Whole || len(ch.Summaries) > 10 {
			t.Errorf("look %d read %d summaries (whole %t): want those written since the look before, a session's few", i+2, len(ch.Summaries), ch.Whole)
		}
	}

	before := len(b.all())
	clockB.Advance(time.Hour) // the looks of that hour run as it passes
	look(t, b, clockB)
	wholes := 0
	for _, ch := range b.all()[before:] {
		if ch.Whole && len(ch.Summaries) >= kept {
			wholes++
		}
	}
	if wholes != 1 {
		t.Errorf("the looks of the next hour read every summary %d times, want once", wholes)
	}
}

// TestLookRemembersBusySessions: a busy session another node runs, seen at
// one look, is remembered by the looks after it, which read only what was
// written since, and read its lease without trying to take it: when its
// node dies without a word (no summary more, its lease left to expire), a
// later look takes it over from that memory.
func TestLookRemembersBusySessions(t *testing.T) {
	if testing.Short() {
		t.Skip("a lease's time to live on a NATS server")
	}
	nodes := newLookNodes(t, time.Second)
	a := nodes.node("node-a")
	ea := nodes.start(a, clock.NewFake(epoch), 0)
	s := callInFlight(t, ea)

	b := &feedReads{Store: nodes.node("node-b")}
	clockB := clock.NewFake(epoch)
	eb := nodes.start(b, clockB, time.Second)
	look(t, b, clockB) // every summary: the session is busy, and node A holds it
	look(t, b, clockB)
	if _, loaded := eb.Session(s.ID()); loaded {
		t.Fatal("node B took a session node A runs")
	}
	b.mu.Lock()
	tried := b.owns[s.ID()]
	b.mu.Unlock()
	if tried != 0 {
		t.Errorf("node B's looks tried %d times to take the lease node A holds, want none: reading it says A holds it, for half the requests", tried)
	}
	// Node A dies without a word: no summary more, its lease unrenewed.
	_ = a.Close()
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(50 * time.Millisecond) {
		look(t, b, clockB)
		if _, loaded := eb.Session(s.ID()); loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node B never took over the session node A left")
		}
	}
	for i, ch := range b.all()[1:] {
		for _, sum := range ch.Summaries {
			if sum.ID == s.ID() {
				t.Fatalf("look %d read the session's summary again: the take-over did not come from what the first look saw", i+2)
			}
		}
	}
}

// TestLookKeepsWhatItReadBeforeAnError: a look whose read of the
// summaries fails part way keeps what it read, and the next look reads on
// from there, not again from where the failed one began: a busy session
// in the part read is taken over, as one in the part after it.
func TestLookKeepsWhatItReadBeforeAnError(t *testing.T) {
	if testing.Short() {
		t.Skip("sessions on a NATS server")
	}
	ctx := context.Background()
	nodes := newLookNodes(t, time.Second)
	a := nodes.node("node-a")
	if err := a.Summarize(ctx, engine.Summary{ID: "kept", Owner: "bob", Created: epoch, Updated: epoch}); err != nil {
		t.Fatal(err)
	}
	b := &feedReads{Store: nodes.node("node-b")}
	clockB := clock.NewFake(epoch)
	eb := nodes.start(b, clockB, time.Second)
	look(t, b, clockB) // every summary: one, idle
	began := b.all()[0].Cursor

	// Node A runs two sessions until their browser calls are in flight,
	// and stops: both wait in the store, busy, with no lease. The failed
	// read returns what the store held once the first was busy.
	ea := nodes.start(a, clock.NewFake(epoch), 0)
	first := callInFlight(t, ea)
	part, err := b.Store.SummariesChanged(ctx, began)
	if err != nil || part.Cursor <= began {
		t.Fatalf("reading the first session's summaries: cursor %d after %d, %v", part.Cursor, began, err)
	}
	second := callInFlight(t, ea)
	stop(t, ea)

	b.mu.Lock()
	b.cut = &part
	b.mu.Unlock()
	look(t, b, clockB)
	look(t, b, clockB)
	b.mu.Lock()
	got := b.cursors[len(b.cursors)-1]
	b.mu.Unlock()
	if got != part.Cursor {
		t.Errorf("the look after the failed read began at %d, want %d, where the failed one stopped (it began at %d)", got, part.Cursor, began)
	}
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		_, firstLoaded := eb.Session(first.ID())
		_, secondLoaded := eb.Session(second.ID())
		if firstLoaded && secondLoaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node B took over the session read before the error: %t, the one after it: %t; want both", firstLoaded, secondLoaded)
		}
		look(t, b, clockB)
	}
}

// TestLookSaysTheStoreIsDown: a node that writes nothing (no session of
// its own) still reads the store at each look; two looks in a row that
// fail to read it make the node's health say the store is down (its
// readiness, the store's failing metric), and the next that works, that
// it is back. One alone does not. So do two whose write of a key of its
// own the store refuses, while it answers the reads. The log says each
// change, however soon one follows another: an operator whose load
// balancer took the node out looks there for why (an outside audit: a
// node not ready for 10 s after a NATS outage, its log silent).
func TestLookSaysTheStoreIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("a NATS server")
	}
	nodes := newLookNodes(t, time.Second)
	var logs testlog.Buffer
	nodes.logger = slog.New(slog.NewTextHandler(&logs, nil))
	said := func(msg string) int { return strings.Count(logs.String(), msg) }
	const notReady, ready = "not ready (/readyz 503)", "reads and writes the store again"
	b := &feedReads{Store: nodes.node("node-b")}
	clockB := clock.NewFake(epoch)
	eb := nodes.start(b, clockB, time.Second)
	// The look records its read's outcome just after the read returns.
	health := func(want func(error) bool, what string) {
		t.Helper()
		for deadline := time.Now().Add(hangGuard); ; time.Sleep(time.Millisecond) {
			err := eb.Health()
			if want(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Health %s: %v", what, err)
			}
		}
	}
	ok := func(err error) bool { return err == nil }
	look(t, b, clockB)
	health(ok, "after a look that read the store, want nil")
	// The store does not answer the reads; or it answers them and refuses
	// the writes: a cluster without its quorum, whose replicas answer
	// reads (an idle node, which writes nothing else, said it was ready
	// while no session could be opened on it).
	for i, fault := range []struct {
		name  string
		field *error
		err   error
		cause string
	}{
		{"reads", &b.down, errors.New("nats: no response from stream"), "no response from stream"},
		{"writes", &b.readOnly, errors.New("nats: timeout"), "takes no writes"},
	} {
		b.mu.Lock()
		*fault.field = fault.err
		b.mu.Unlock()
		// One look that fails is a blip (a stream electing its leader),
		// which every node sees at once: the node stays ready.
		look(t, b, clockB)
		if err := eb.Health(); err != nil {
			t.Fatalf("Health after one look whose %s failed: %v, want nil", fault.name, err)
		}
		look(t, b, clockB)
		health(func(err error) bool {
			return errors.Is(err, engine.ErrStoreUnavailable) && strings.Contains(err.Error(), fault.cause)
		}, "after two looks whose "+fault.name+" failed, want ErrStoreUnavailable with its cause")
		if n := said(notReady); n != i+1 {
			t.Errorf("the log said %d times that the node is not ready, want %d\n%s", n, i+1, logs.String())
		}
		b.mu.Lock()
		*fault.field = nil
		b.mu.Unlock()
		look(t, b, clockB)
		health(ok, "after the store took a look's "+fault.name+" again, want nil")
		if n := said(ready); n != i+1 {
			t.Errorf("the log said %d times that the node is ready again, want %d\n%s", n, i+1, logs.String())
		}
	}
}
