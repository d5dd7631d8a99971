package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
)

// TestDelete: a browser deletes a chat of its own, on a NATS that nodes
// share. In memory with a page open and a model turn streaming, the turn
// stops, the page reads session.ended {reason: "deleted"}, the worker
// session.end, and nothing of the chat is stored after (the turn's last
// deltas included); a chat not in memory, ended or not, is deleted under
// its lease; another browser's is refused as one that does not exist, and
// kept; one another node runs is refused naming that node, whose own
// Delete deletes it. Deleted, a chat is neither listed nor loaded.
func TestDelete(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	streaming := make(chan struct{}, 10)
	models := model.ResolverFunc(func(string) (model.Model, error) {
		return &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
			if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Content, "stream") {
				streaming <- struct{}{}
				<-ctx.Done() // a long reply, cut by the end
				return model.Response{}, ctx.Err()
			}
			return model.Response{Text: "done", StopReason: model.StopEndTurn}, nil
		}}, nil
	})
	type node struct {
		e      *engine.Engine
		store  *jetstream.Store
		worker *testWorker
		clock  *clock.Fake
	}
	start := func(name string) node {
		t.Helper()
		w := &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}
		c := clock.NewFake(epoch)
		e, store := sharedNode(t, url, name, engine.Options{Worker: w, Models: models, Clock: c, Unload: time.Minute})
		return node{e, store, w, c}
	}
	a, b := start("a"), start("b")
	chat := func(n node, owner, text string) (*engine.Session, *reader) {
		t.Helper()
		s, err := n.e.Open(ctx, engine.OpenOptions{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		if err := p.page.Send(ctx, text); err != nil {
			t.Fatal(err)
		}
		return s, p
	}
	unload := func(n node, s *engine.Session, p *reader) {
		t.Helper()
		p.page.Detach()
		if _, err := s.Transcript(ctx); err != nil { // a barrier: the page has left
			t.Fatal(err)
		}
		n.clock.Advance(time.Minute)
		recv(t, s.Done(), "the idle session's unload")
	}
	gone := func(n node, id string) {
		t.Helper()
		if _, err := n.store.Load(ctx, id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("the store still has session %s's journal: %v", id, err)
		}
		if _, err := n.e.Load(ctx, id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("Load of deleted session %s: %v, want ErrNoSession", id, err)
		}
		list, err := n.e.List(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		for _, sum := range list {
			if sum.ID == id {
				t.Errorf("the deleted session %s is listed: %+v", id, sum)
			}
		}
	}

	t.Run("in memory, streaming", func(t *testing.T) {
		s, p := chat(a, "alice", "stream a long reply")
		recv(t, streaming, "the model turn")
		if err := a.e.Delete(ctx, s.ID(), "bob"); !errors.Is(err, engine.ErrNoSession) {
			t.Fatalf("bob's Delete of alice's chat: %v, want ErrNoSession", err)
		}
		if err := a.e.Delete(ctx, s.ID(), "alice"); err != nil {
			t.Fatal(err)
		}
		ended := p.until("session.ended", isType(engine.EventSessionEnded))
		if f := string(ended[len(ended)-1].Frame); !strings.Contains(f, `"reason":"deleted"`) {
			t.Errorf("session.ended = %s, want reason deleted", f)
		}
		var ends []string
		for _, r := range a.worker.requests(engine.TypeSessionEnd) {
			ends = append(ends, r.Trigger.(engine.SessionEnd).Reason)
		}
		if len(ends) != 1 || ends[0] != engine.ReasonDeleted {
			t.Errorf("the worker's session.end reasons: %q, want [deleted]", ends)
		}
		gone(a, s.ID())
		gone(b, s.ID())
	})

	t.Run("not in memory, and ended", func(t *testing.T) {
		s, p := chat(a, "alice", "hello")
		p.until("the turn's end", finalIdle("done"))
		unload(a, s, p)
		ended, q := chat(a, "alice", "hello")
		q.until("the turn's end", finalIdle("done"))
		ended.End(ctx, "done with it")
		for _, id := range []string{s.ID(), ended.ID()} {
			if err := b.e.Delete(ctx, id, "bob"); !errors.Is(err, engine.ErrNoSession) {
				t.Fatalf("bob's Delete of alice's chat: %v, want ErrNoSession", err)
			}
			if _, err := b.store.Load(ctx, id); err != nil {
				t.Fatalf("bob's Delete deleted alice's chat: %v", err)
			}
			if err := b.e.Delete(ctx, id, "alice"); err != nil {
				t.Fatal(err)
			}
			gone(a, id)
			if err := b.e.Delete(ctx, id, "alice"); !errors.Is(err, engine.ErrNoSession) {
				t.Errorf("a second Delete: %v, want ErrNoSession", err)
			}
		}
	})

	t.Run("another node runs it", func(t *testing.T) {
		s, p := chat(a, "alice", "hello")
		p.until("the turn's end", finalIdle("done"))
		err := b.e.Delete(ctx, s.ID(), "alice")
		var elsewhere *engine.OwnedElsewhereError
		if !errors.As(err, &elsewhere) || elsewhere.Node != "a" {
			t.Fatalf("node b's Delete of a chat node a runs: %v, want ErrOwnedElsewhere naming a", err)
		}
		if err := a.e.Delete(ctx, s.ID(), "alice"); err != nil {
			t.Fatal(err)
		}
		p.until("session.ended", isType(engine.EventSessionEnded))
		gone(b, s.ID())
	})
}

// gatedStore holds Delete until release is closed, once entered says it
// began.
type gatedStore struct {
	engine.Store
	entered, release chan struct{}
}

func (g *gatedStore) Delete(ctx context.Context, id string) error {
	close(g.entered)
	<-g.release
	return g.Store.Delete(ctx, id)
}

// TestLoadDuringADeletion: a load of a chat being deleted from the store
// (a page reloading as its user deletes the chat elsewhere) waits for the
// deletion and finds nothing, rather than read the journal as it goes and
// bring half a chat back into memory.
func TestLoadDuringADeletion(t *testing.T) {
	ctx := context.Background()
	store := &gatedStore{Store: engine.NewMemoryStore(), entered: make(chan struct{}), release: make(chan struct{})}
	c := clock.NewFake(epoch)
	e, err := engine.New(engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store:  store, Clock: c, Logger: quiet(), Unload: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, e)
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0)
	if err := p.page.Send(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	p.until("the turn's end", finalIdle("done"))
	p.page.Detach()
	if _, err := s.Transcript(ctx); err != nil { // a barrier: the page has left
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	recv(t, s.Done(), "the idle session's unload")

	deleted := make(chan error, 1)
	go func() { deleted <- e.Delete(ctx, s.ID(), "alice") }()
	recv(t, store.entered, "the store's Delete")
	loaded := make(chan error, 1)
	go func() {
		_, err := e.Load(ctx, s.ID())
		loaded <- err
	}()
	select {
	case err := <-loaded:
		t.Fatalf("a load during the deletion did not wait for it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(store.release)
	if err := recv(t, deleted, "the deletion"); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, loaded, "the load"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("the load during the deletion: %v, want ErrNoSession", err)
	}
}
