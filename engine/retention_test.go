package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// TestRetentionSparesAnotherNodesSession: on a NATS that nodes share, a
// node's retention sweep deletes the expired sessions no node runs, and
// leaves one that another node has in memory (a page open on a chat
// untouched for longer than Retain), which keeps working.
func TestRetentionSparesAnotherNodesSession(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	start := func(node string, c *clock.Fake) (*engine.Engine, engine.Store) {
		t.Helper()
		store, err := jetstream.Open(ctx, jetstream.Options{URL: url, Node: node, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		e, err := engine.New(engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
			Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
			Store:  store, Clock: c, Logger: quiet(), Retain: 48 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, e) })
		return e, store
	}
	chatOn := func(e *engine.Engine) (*engine.Session, *reader) {
		t.Helper()
		s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		if err := p.page.Send(ctx, "hello"); err != nil {
			t.Fatal(err)
		}
		p.until("the turn's end", finalIdle("done"))
		return s, p
	}

	clockA := clock.NewFake(epoch)
	a, store := start("a", clockA)
	open, page := chatOn(a) // its page stays
	left, leaving := chatOn(a)
	leaving.page.Detach()
	if _, err := left.Transcript(ctx); err != nil { // a barrier: the page has left
		t.Fatal(err)
	}
	clockA.Advance(time.Minute) // Unload: it leaves memory
	recv(t, left.Done(), "the idle session's unload")

	// Node b starts three days later and sweeps a minute after.
	clockB := clock.NewFake(epoch.Add(72 * time.Hour))
	_, _ = start("b", clockB)
	clockB.Advance(time.Minute)
	deadline := time.Now().Add(hangGuard)
	for {
		_, err := store.Load(ctx, left.ID())
		if errors.Is(err, engine.ErrNoSession) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node b's sweep did not delete the expired session no node runs: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := store.Load(ctx, open.ID()); err != nil {
		t.Fatalf("node b's sweep deleted the session node a runs: %v", err)
	}
	if err := page.page.Send(ctx, "still here"); err != nil {
		t.Fatal(err)
	}
	page.until("the next turn's end", finalIdle("done"))
}
