package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// feedReads is a node's store that keeps what each read of its summary
// feed returned.
type feedReads struct {
	*jetstream.Store
	mu    sync.Mutex
	reads []engine.Changes
}

func (f *feedReads) SummariesChanged(ctx context.Context, cursor uint64) (engine.Changes, error) {
	ch, err := f.Store.SummariesChanged(ctx, cursor)
	if err == nil {
		f.mu.Lock()
		f.reads = append(f.reads, ch)
		f.mu.Unlock()
	}
	return ch, err
}

func (f *feedReads) all() []engine.Changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.Changes(nil), f.reads...)
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
	url := natstest.Server(t, nil)
	node := func(name string) *jetstream.Store {
		t.Helper()
		s, err := jetstream.Open(ctx, jetstream.Options{URL: url, Node: name, LeaseTTL: 2 * time.Second, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	w := confirmWorker(&engine.RetryPolicy{Attempts: 2, Timeout: "30s"})
	w.agent.Model = "fake-model"
	m := callsThenSummary(use("call_1", "confirm", `{"question":"Delete?"}`))
	start := func(store engine.Store, clk *clock.Fake, adopt time.Duration) *engine.Engine {
		t.Helper()
		e, err := engine.New(engine.Options{
			Worker: w, Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil }),
			Store: store, Clock: clk, Logger: quiet(), Retain: -1, Rand: half, Adopt: adopt,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, e) })
		return e
	}

	a := node("node-a")
	const kept = 2000
	for i := range kept {
		if err := a.Summarize(ctx, engine.Summary{ID: fmt.Sprintf("kept-%d", i), Owner: "bob", Created: epoch, Updated: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	b := &feedReads{Store: node("node-b")}
	clockB := clock.NewFake(epoch)
	eb := start(b, clockB, time.Second)
	// look lets node B's adopter run once more.
	look := func() {
		t.Helper()
		n := len(b.all())
		for deadline := time.Now().Add(hangGuard); len(b.all()) == n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("node B did not look")
			}
			clockB.Advance(100 * time.Millisecond) // its next look, once it armed it
		}
	}
	look()
	if first := b.all()[0]; !first.Whole || len(first.Summaries) < kept {
		t.Fatalf("the first look read %d summaries (whole %t), want every one of the %d kept", len(first.Summaries), first.Whole, kept)
	}

	// Node A runs a session until its browser call is in flight, and
	// stops: the session, busy, waits in the store with no lease.
	ea := start(a, clock.NewFake(epoch), 0)
	s, err := ea.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0, "confirm")
	if err := p.page.Send(ctx, "delete my draft"); err != nil {
		t.Fatal(err)
	}
	p.until("tool.call", isType(engine.FrameToolCall))
	stop(t, ea)

	for deadline := time.Now().Add(hangGuard); ; {
		if _, loaded := eb.Session(s.ID()); loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node B never took the stopped node's busy session over")
		}
		look()
	}
	for i, ch := range b.all()[1:] {
		if ch.Whole || len(ch.Summaries) > 10 {
			t.Errorf("look %d read %d summaries (whole %t): want those written since the look before, a session's few", i+2, len(ch.Summaries), ch.Whole)
		}
	}

	before := len(b.all())
	clockB.Advance(time.Hour) // the looks of that hour run as it passes
	look()
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
