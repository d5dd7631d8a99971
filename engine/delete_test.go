package engine_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// TestDelete: a browser deletes a chat of its own, on a NATS that nodes
// share. In memory with a page open and a model turn streaming, the turn
// stops, the page reads session.ended {reason: "deleted"}, and nothing of
// the chat is stored after (the turn's last deltas included); a chat not
// in memory, ended or not, is deleted under its lease; either way the
// worker gets session.end {reason: "deleted"} once, so it can delete what
// it keeps. Another browser's is refused as one that does not exist, and
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
		if f := ended[len(ended)-2]; f.Type != engine.EventModelFinished || !strings.Contains(string(f.Frame), `"stopReason":"cancelled"`) {
			t.Errorf("the event before session.ended: %s %s, want model.finished {stopReason: cancelled}: the streaming turn ends", f.Type, f.Frame)
		}
		toldDeleted(t, a.worker, s.ID(), 1)
		gone(a, s.ID())
		gone(b, s.ID())
	})

	t.Run("not in memory, and ended", func(t *testing.T) {
		s, p := chat(a, "alice", "hello")
		p.until("the turn's end", finalIdle("done"))
		leaveMemory(t, s, p, a.clock)
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
			toldDeleted(t, b.worker, id, 1) // the ended one's worker heard "done with it" before
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

// toldDeleted waits until w has had n session.end triggers with reason
// "deleted" for session id (the worker is told on a runner, after the
// purge), and checks that no more come with them.
func toldDeleted(t *testing.T, w *testWorker, id string, n int) {
	t.Helper()
	count := func() int {
		k := 0
		for _, r := range w.requests(engine.TypeSessionEnd) {
			if r.Session == id && r.Trigger.(engine.SessionEnd).Reason == engine.ReasonDeleted {
				k++
			}
		}
		return k
	}
	waitUntil(t, "session.end {reason: deleted} to the worker", func() bool { return count() >= n })
	if k := count(); k != n {
		t.Errorf("the worker got %d session.end {reason: deleted} for %s, want %d", k, id, n)
	}
}

// aliceChat starts an engine made of o (a test worker when it has none,
// the fake clock epoch, a quiet logger) and a chat of alice's on it whose
// page has sent text; the engine stops at the test's end.
func aliceChat(t *testing.T, o engine.Options, text string) (*engine.Engine, *engine.Session, *reader) {
	t.Helper()
	if o.Worker == nil {
		o.Worker = &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}
	}
	if o.Clock == nil {
		o.Clock = clock.NewFake(epoch)
	}
	o.Logger = quiet()
	e, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, e) })
	s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0)
	if err := p.page.Send(context.Background(), text); err != nil {
		t.Fatal(err)
	}
	return e, s, p
}

// helloChat opens a chat of alice's on e whose page has said hello and
// read the reply.
func helloChat(t *testing.T, e *engine.Engine) (*engine.Session, *reader) {
	t.Helper()
	s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0)
	if err := p.page.Send(context.Background(), "hello"); err != nil {
		t.Fatal(err)
	}
	p.until("the turn's end", finalIdle("done"))
	return s, p
}

// leaveMemory detaches p, s's only page, and advances c past the engine's
// Unload (a minute): s, idle, leaves memory.
func leaveMemory(t *testing.T, s *engine.Session, p *reader, c *clock.Fake) {
	t.Helper()
	p.page.Detach()
	if _, err := s.Transcript(context.Background()); err != nil { // a barrier: the page has left
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	recv(t, s.Done(), "the idle session's unload")
}

// gatedStore holds Delete until release is closed, once entered says it
// began, and counts the loads that read a journal meanwhile.
type gatedStore struct {
	engine.Store
	entered, release chan struct{}
	held             atomic.Bool
	loadsHeld        atomic.Int32
}

func (g *gatedStore) Delete(ctx context.Context, id string) error {
	g.held.Store(true)
	close(g.entered)
	<-g.release
	defer g.held.Store(false)
	return g.Store.Delete(ctx, id)
}

func (g *gatedStore) Load(ctx context.Context, id string) ([]engine.Batch, error) {
	if g.held.Load() {
		g.loadsHeld.Add(1)
	}
	return g.Store.Load(ctx, id)
}

// TestLoadDuringADeletion: a load of a chat being deleted from the store
// (a page reloading as its user deletes the chat elsewhere) waits for the
// deletion and finds nothing, rather than read the journal as it goes and
// bring half a chat back into memory.
func TestLoadDuringADeletion(t *testing.T) {
	ctx := context.Background()
	store := &gatedStore{Store: engine.NewMemoryStore(), entered: make(chan struct{}), release: make(chan struct{})}
	c := clock.NewFake(epoch)
	e, s, p := aliceChat(t, engine.Options{Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: store, Clock: c, Unload: time.Minute}, "hello")
	p.until("the turn's end", finalIdle("done"))
	leaveMemory(t, s, p, c)

	deleted := make(chan error, 1)
	go func() { deleted <- e.Delete(ctx, s.ID(), "alice") }()
	recv(t, store.entered, "the store's Delete")
	loaded := make(chan error, 1)
	go func() {
		_, err := e.Load(ctx, s.ID())
		loaded <- err
	}()
	// The load waits in Engine.Load, whatever the machine's speed: it
	// reads no journal while the deletion holds it.
	waitUntil(t, "the load's wait", func() bool { return goroutineWaits("engine.(*Engine).Load") })
	close(store.release)
	if err := recv(t, deleted, "the deletion"); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, loaded, "the load"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("the load during the deletion: %v, want ErrNoSession", err)
	}
	if n := store.loadsHeld.Load(); n != 0 {
		t.Errorf("%d loads read the journal while it was being deleted", n)
	}
}

// goroutineWaits reports whether a goroutine is parked in fn (a function
// name as stack traces give it), in a select or on a channel.
func goroutineWaits(fn string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if (strings.Contains(g, "[select") || strings.Contains(g, "[chan receive")) && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}

// failingStore refuses appends and deletes while down.
type failingStore struct {
	engine.Store
	down atomic.Bool
}

func (f *failingStore) Append(ctx context.Context, id string, b engine.Batch) error {
	if f.down.Load() {
		return errors.New("no space left on device")
	}
	return f.Store.Append(ctx, id, b)
}

func (f *failingStore) Delete(ctx context.Context, id string) error {
	if f.down.Load() {
		return errors.New("no space left on device")
	}
	return f.Store.Delete(ctx, id)
}

// TestDeleteWithAFailingStore: a deletion the store refuses is an
// ErrStoreUnavailable the browser may try again, and the worker is not
// told the chat is gone: it is not. The store may fail as the chat is
// deleted (its end's step, then the purge: the chat leaves memory), or
// have failed before (a step waits for it: the chat is refused as it is,
// and stays). Once the store takes writes again, the same Delete deletes
// it, and the worker hears it once.
func TestDeleteWithAFailingStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting bool // a step of the chat waits for the store as it is deleted
	}{
		{"as the chat is deleted", false},
		{"with a step waiting for it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := &failingStore{Store: engine.NewMemoryStore()}
			w := &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}
			c := clock.NewFake(epoch)
			e, s, p := aliceChat(t, engine.Options{Worker: w, Store: store, Clock: c,
				Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil })}, "hello")
			p.until("the turn's end", finalIdle("done"))
			store.down.Store(true)
			if tc.waiting {
				if err := p.page.Send(ctx, "one more"); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "the store's failure", func() bool { return e.Health() != nil })
			}
			err := e.Delete(ctx, s.ID(), "alice")
			if !errors.Is(err, engine.ErrStoreUnavailable) {
				t.Fatalf("Delete with the store down: %v, want ErrStoreUnavailable", err)
			}
			if _, loaded := e.Session(s.ID()); loaded != tc.waiting {
				t.Errorf("in memory after the refused Delete: %v, want %v", loaded, tc.waiting)
			}
			store.down.Store(false)
			waitUntil(t, "the store's return", func() bool {
				c.Advance(time.Second) // the steps waiting are tried again every second
				return e.Health() == nil
			})
			if err := e.Delete(ctx, s.ID(), "alice"); err != nil {
				t.Fatalf("Delete once the store is back: %v", err)
			}
			toldDeleted(t, w, s.ID(), 1) // once: not for the refused Delete too
			if _, err := store.Load(ctx, s.ID()); !errors.Is(err, engine.ErrNoSession) {
				t.Errorf("the store still has the chat: %v", err)
			}
		})
	}
}

// TestDeleteAnswersOncePurged: Delete answers once the chat is gone from
// the store, not once the session's model turn has returned: a provider's
// client slow to see its context would turn a deletion done into "not
// deleted: retry".
func TestDeleteAnswersOncePurged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard) // a regression fails, not hangs
	defer cancel()
	store := engine.NewMemoryStore()
	started, unblock := make(chan struct{}, 1), make(chan struct{})
	m := &fakeModel{reply: func(ctx context.Context, req model.Request) (model.Response, error) {
		started <- struct{}{}
		<-unblock // a client that does not watch ctx
		return model.Response{}, ctx.Err()
	}}
	e, s, _ := aliceChat(t, engine.Options{Store: store,
		Models: model.ResolverFunc(func(string) (model.Model, error) { return m, nil })}, "a slow reply")
	t.Cleanup(func() { close(unblock) }) // before the engine's stop: cleanups run last first
	recv(t, started, "the model turn")
	if err := e.Delete(ctx, s.ID(), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load(ctx, s.ID()); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Delete answered, and the store still has the chat: %v", err)
	}
}

// TestSummaryWithoutJournalIsDropped: a chat whose journal is gone while
// its summary is there (a deletion a crash undid in part: the NATS server
// killed after the purge brought the summary's earlier revisions back) is
// not listed once the gateway starts again: its title, the user's first
// message, would be, and the chat open as unknown_session.
func TestSummaryWithoutJournalIsDropped(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	store, err := jetstream.Open(ctx, jetstream.Options{URL: url, Node: "a", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ghost := engine.Summary{ID: "deleted-before-the-crash", Owner: "alice", Title: "my address is …", Created: epoch, Updated: epoch}
	if err := store.Summarize(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	e, _ := sharedNode(t, url, "b", engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }), Clock: clock.NewFake(epoch)})
	s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := e.List(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != s.ID() {
		t.Errorf("alice's chats after a start: %+v, want only %s (not the one whose journal is gone)", list, s.ID())
	}
	if sums, _ := store.Summaries(ctx, "alice"); len(sums) != 1 {
		t.Errorf("the store keeps %d of alice's summaries, want 1", len(sums))
	}
}

// TestJournalPurgedUnderASession: an operator's purge of a chat's journal
// (storage.md) while a gateway holds the chat in memory: the session's
// next step does not follow what the journal holds, and after a few tries
// (which a replica a moment behind would pass) it leaves memory rather
// than retry for ever (the store unavailable to it, the node not ready,
// until a restart); opened again, the chat is gone.
func TestJournalPurgedUnderASession(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	c := clock.NewFake(epoch)
	e, _ := sharedNode(t, url, "a", engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }), Clock: c, Unload: time.Minute})
	first, p := helloChat(t, e)
	// Unloaded and loaded again, the node has not read where the journal
	// ends yet: its next step reads it.
	leaveMemory(t, first, p, c)
	s, err := e.Load(ctx, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	p = attach(t, s, s.LastSeq())

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, jetstream.JournalStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx, natsjs.WithPurgeSubject("gateway.journal."+s.ID())); err != nil {
		t.Fatal(err)
	}
	_ = p.page.Send(ctx, "and now?") // its step does not fit the journal
	// Tried again every second (a replica a moment behind would have
	// caught up), then let go.
	waitUntil(t, "the session's leaving memory", func() bool {
		select {
		case <-s.Done():
			return true
		default:
			c.Advance(time.Second)
			return false
		}
	})
	if err := e.Health(); err != nil {
		t.Errorf("the engine's health after the session left: %v, want nil", err)
	}
	if _, err := e.Load(ctx, s.ID()); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Load of the purged chat: %v, want ErrNoSession", err)
	}
}

// shortList is the JetStream store whose journal listing misses one id,
// as the server's paged listing (100,000 subjects a page, offsets over a
// sorted list) misses one when a journal sorted before the page boundary
// is purged between two pages.
type shortList struct {
	*jetstream.Store
	missing string
}

func (s shortList) Journals(ctx context.Context) ([]string, error) {
	ids, err := s.Store.Journals(ctx)
	return slices.DeleteFunc(ids, func(id string) bool { return id == s.missing }), err
}

// TestAListingThatMissesAJournalDeletesNoChat: a chat with its journal
// and its summary, left idle, survives a start whose list of journals
// misses it (a second review's must-fix: the summaries without a journal
// were deleted, journal and all, on that list's word alone).
func TestAListingThatMissesAJournalDeletesNoChat(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	c := clock.NewFake(epoch)
	opts := engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }), Clock: c, Unload: time.Minute}
	a, st := sharedNode(t, url, "a", opts)
	s, p := helloChat(t, a)
	leaveMemory(t, s, p, c)

	opts.Store, opts.Logger = shortList{Store: st, missing: s.ID()}, quiet()
	b, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, b)
	if err := b.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(ctx, s.ID()); errors.Is(err, engine.ErrNoSession) {
		t.Errorf("the chat's journal was purged: one listing that missed it deleted a live chat whole (Store.Delete)")
	}
}

// BenchmarkDelete deletes a chat in memory, its page open, on the
// embedded JetStream store: the session's end, its last step stored, the
// purge of its journal and its summary, its leaving memory (the answer's
// wait of DELETE /sessions/{id}, less HTTP). The chat's opening and first
// reply are not timed.
func BenchmarkDelete(b *testing.B) {
	ctx := context.Background()
	store, err := jetstream.Open(ctx, jetstream.Options{DataDir: b.TempDir(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	e, err := engine.New(engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }), Store: store, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close(ctx) }()
	for b.Loop() {
		b.StopTimer()
		s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.Attach(ctx, engine.AttachOptions{Buffer: 1 << 10})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Send(ctx, "hello"); err != nil {
			b.Fatal(err)
		}
		for idle := false; !idle; {
			<-p.Ready()
			for _, ev := range p.Take(nil) {
				idle = idle || ev.Type == engine.EventSessionIdle
			}
		}
		b.StartTimer()
		if err := e.Delete(ctx, s.ID(), "alice"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeleteUnlisted: an operator erases a chat that no list names (its
// summary lost, its journal kept): one not in memory has its journal
// purged under its lease; one in memory is ended where it runs (its page
// reads session.ended, deleted) and purged; an id with no journal either
// is ErrNoSession.
func TestDeleteUnlisted(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	opts := func() engine.Options {
		return engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
			Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }), Clock: clock.NewFake(epoch)}
	}
	e, store := sharedNode(t, url, "a", opts())
	chat := func(e *engine.Engine) (string, *reader) {
		t.Helper()
		s, err := e.Open(ctx, engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		_ = p.page.Send(ctx, "my name is Ada")
		p.until("the reply", finalIdle(""))
		return s.ID(), p
	}
	js, err := natsjs.New(store.Conn())
	if err != nil {
		t.Fatal(err)
	}
	unlist := func(id string) {
		t.Helper()
		kv, err := js.KeyValue(ctx, jetstream.SummaryBucket)
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Purge(ctx, "alice."+id); err != nil {
			t.Fatal(err)
		}
	}
	stored, p := chat(e)
	p.page.Detach()
	stop(t, e)
	unlist(stored)
	e2, store2 := sharedNode(t, url, "b", opts())
	live, page := chat(e2)
	unlist(live)

	if err := e2.DeleteUnlisted(ctx, "no-such-chat"); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("DeleteUnlisted of an id with no journal: %v, want ErrNoSession", err)
	}
	for _, id := range []string{stored, live} {
		if err := e2.DeleteUnlisted(ctx, id); err != nil {
			t.Fatalf("DeleteUnlisted(%s): %v", id, err)
		}
		if _, err := store2.Load(ctx, id); !errors.Is(err, engine.ErrNoSession) {
			t.Errorf("session %s's journal after DeleteUnlisted: %v, want gone", id, err)
		}
	}
	page.until("session.ended, deleted", func(ev engine.Event) bool {
		return ev.Type == engine.EventSessionEnded && strings.Contains(string(ev.Frame), `"deleted"`)
	})
}
