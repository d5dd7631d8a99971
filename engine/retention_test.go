package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/clienttools/gateway/testlog"
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
		return sharedNode(t, url, node, engine.Options{Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
			Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
			Clock:  c, Retain: 48 * time.Hour})
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

// sharedNode starts a node of a cluster on the NATS at url: its store, and
// an engine on it made of o (its Store and Logger filled in), both stopped
// at the test's end.
func sharedNode(t *testing.T, url, node string, o engine.Options) (*engine.Engine, *jetstream.Store) {
	t.Helper()
	store, err := jetstream.Open(context.Background(), jetstream.Options{URL: url, Node: node, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	o.Store, o.Logger = store, quiet()
	e, err := engine.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, e) })
	return e, store
}

// TestRetention: a session untouched for longer than Retain is deleted by
// the sweep; a newer one is kept; List shows a browser's sessions with their
// titles, newest first.
func TestRetention(t *testing.T) {
	r := &rig{t: t, clock: clock.NewFake(epoch), store: engine.NewMemoryStore()}
	e, err := engine.New(engine.Options{
		Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: r.store, Clock: r.clock, Logger: quiet(), Retain: 48 * time.Hour, Unload: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, e)
	open := func(text string) string {
		s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		p := attach(t, s, 0)
		_ = p.page.Send(context.Background(), text)
		p.until("idle", finalIdle("done"))
		p.page.Detach()
		if _, err := s.Transcript(context.Background()); err != nil { // a barrier: the page has left
			t.Fatal(err)
		}
		return s.ID()
	}
	unloaded := func() {
		t.Helper()
		r.clock.Advance(time.Minute)
		deadline := time.Now().Add(hangGuard)
		for e.Loaded() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the idle session did not unload")
			}
			time.Sleep(time.Millisecond)
		}
	}
	old := open("an old   chat\nabout nothing")
	unloaded()
	r.clock.Advance(24 * time.Hour)
	recent := open("a recent chat")
	unloaded()
	list, err := e.List(context.Background(), "alice")
	if err != nil || len(list) != 2 || list[0].ID != recent || list[1].ID != old || list[1].Title != "an old chat about nothing" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	// 48h and 30s after the old chat's message: past its retention, and
	// the hourly sweep (at a minute past each hour) has not deleted it
	// yet. It is gone all the same: not listed, not loaded.
	r.clock.Advance(48*time.Hour + 30*time.Second - 24*time.Hour - 2*time.Minute)
	if all, _ := r.store.Summaries(context.Background(), "alice"); len(all) != 2 {
		t.Fatalf("the store has %d of alice's sessions before the sweep, want 2", len(all))
	}
	list, _ = e.List(context.Background(), "alice")
	if len(list) != 1 || list[0].ID != recent {
		t.Errorf("past retention, before the sweep: %+v, want only %s", list, recent)
	}
	if _, err := e.Load(context.Background(), old); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Load of the expired session before the sweep: %v, want ErrNoSession", err)
	}
	r.clock.Advance(24 * time.Hour) // the old one is 72h old, the recent one 48h less a minute
	list, _ = e.List(context.Background(), "alice")
	if len(list) != 1 || list[0].ID != recent {
		t.Fatalf("after the sweep: %+v, want only %s", list, recent)
	}
	if all, _ := r.store.Summaries(context.Background(), "alice"); len(all) != 1 {
		t.Errorf("the store has %d of alice's sessions after the sweep, want 1", len(all))
	}
	if _, err := e.Load(context.Background(), old); !errors.Is(err, engine.ErrNoSession) {
		t.Errorf("Load of the expired session: %v", err)
	}
}

// TestShortRetainSweptSoon: with a Retain shorter than two hours, the
// sweep runs every half Retain (at most once a minute), so an expired
// session leaves the store soon after its Retain, not up to an hour
// later.
func TestShortRetainSweptSoon(t *testing.T) {
	c := clock.NewFake(epoch)
	store := engine.NewMemoryStore()
	e, err := engine.New(engine.Options{
		Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: store, Clock: c, Logger: quiet(), Retain: 4 * time.Minute, Unload: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, e)
	s, err := e.Open(context.Background(), engine.OpenOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	p := attach(t, s, 0)
	_ = p.page.Send(context.Background(), "hello")
	p.until("idle", finalIdle("done"))
	p.page.Detach()
	if _, err := s.Transcript(context.Background()); err != nil { // a barrier: the page has left
		t.Fatal(err)
	}
	c.Advance(time.Second) // Unload
	recv(t, s.Done(), "the idle session's unload")
	// Sweeps at 1, 3, 5 and 7 minutes: the session expires at 4.
	for range 7 {
		c.Advance(time.Minute)
	}
	waitUntil(t, "the expired session's deletion", func() bool {
		all, _ := store.Summaries(context.Background(), "alice")
		return len(all) == 0
	})
}

// listedStore is a MemoryStore that lists its journals (JournalList), each
// written at the time the test says.
type listedStore struct {
	*engine.MemoryStore
	mu      sync.Mutex
	updated map[string]time.Time
}

func (s *listedStore) Journals(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.updated {
		if _, err := s.Load(ctx, id); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (s *listedStore) JournalUpdated(ctx context.Context, id string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.Load(ctx, id); err != nil {
		return time.Time{}, err
	}
	return s.updated[id], nil
}

// TestRetentionOfAJournalNoSummaryNames: the sweep deletes a journal past
// Retain that no summary names (its bucket lost, a summary that does not
// read back), by when it was last written, and keeps a younger one: it
// read the summaries alone, and kept such a chat for ever.
func TestRetentionOfAJournalNoSummaryNames(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(epoch)
	store := &listedStore{MemoryStore: engine.NewMemoryStore(), updated: map[string]time.Time{
		"old": epoch.Add(-72 * time.Hour), "young": epoch.Add(-time.Hour),
	}}
	for id := range store.updated {
		ev := engine.Event{Seq: 1, Type: engine.EventSessionIdle, Frame: json.RawMessage(`{"type":"session.idle","seq":1}`)}
		if err := store.Append(ctx, id, engine.Batch{Events: []engine.Event{ev}, State: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := engine.New(engine.Options{
		Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}}, Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil }),
		Store: store, Clock: clk, Logger: quiet(), Retain: 48 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, e)
	clk.Advance(2 * time.Minute) // the first sweep, a minute after the start
	waitUntil(t, "the old journal deleted", func() bool {
		_, err := store.Load(ctx, "old")
		return errors.Is(err, engine.ErrNoSession)
	})
	if _, err := store.Load(ctx, "young"); err != nil {
		t.Errorf("the young journal after the sweep: %v, want it kept", err)
	}
}

// deletedDuringSweep is a node's store on which, once armed, another node
// deletes chat deleting between the sweep's read of the summaries and its
// read of the journals; each read of the journals is said on journals.
type deletedDuringSweep struct {
	*jetstream.Store
	deleting atomic.Pointer[string]
	journals chan struct{}
}

func (d *deletedDuringSweep) Journals(ctx context.Context) ([]string, error) {
	if id := d.deleting.Swap(nil); id != nil {
		if err := d.Delete(ctx, *id); err != nil {
			return nil, err
		}
	}
	defer func() { d.journals <- struct{}{} }()
	return d.Store.Journals(ctx)
}

// TestSweepCountsNoChatDeletedMeanwhile: a chat deleted (on another node,
// or by its browser) while the retention sweep runs, between its read of
// the summaries and of the journals, is no summary whose journal is gone:
// the sweep logged one such "deleted before a crash, or lost" at every
// sweep of a busy gateway with no crash (an outside soak).
func TestSweepCountsNoChatDeletedMeanwhile(t *testing.T) {
	url := natstest.Server(t, nil)
	ctx := context.Background()
	js, err := jetstream.Open(ctx, jetstream.Options{URL: url, Node: "a", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.Close() })
	store := &deletedDuringSweep{Store: js, journals: make(chan struct{}, 10)}
	var logs testlog.Buffer
	c := clock.NewFake(epoch)
	e, err := engine.New(engine.Options{Store: store, Clock: c, Unload: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Worker: &testWorker{agent: engine.AgentConfig{Model: "fake-model"}},
		Models: model.ResolverFunc(func(string) (model.Model, error) { return textModel(), nil })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, e) })
	s, p := helloChat(t, e)
	leaveMemory(t, s, p, c) // and the first sweep runs
	recv(t, store.journals, "the first sweep")

	id := s.ID()
	store.deleting.Store(&id)
	c.Advance(time.Hour)
	recv(t, store.journals, "the second sweep, and the deletion")
	// The third sweep begins once the second has ended.
	for deadline := time.Now().Add(hangGuard); ; {
		c.Advance(time.Hour)
		select {
		case <-store.journals:
		case <-time.After(10 * time.Millisecond):
			if time.Now().Before(deadline) {
				continue
			}
			t.Fatal("no third sweep")
		}
		break
	}
	if strings.Contains(logs.String(), "journal is gone") {
		t.Errorf("a chat deleted during the sweep was logged as a summary left without its journal:\n%s", logs.String())
	}
	if sums, _ := store.Summaries(ctx, "alice"); len(sums) != 0 {
		t.Errorf("alice's summaries after the deletion: %+v, want none", sums)
	}
}
