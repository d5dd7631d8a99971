package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clienttools/gateway/clock"
	"github.com/clienttools/gateway/engine"
	"github.com/clienttools/gateway/engine/model"
	"github.com/clienttools/gateway/metrics"
	"github.com/clienttools/gateway/store/jetstream"
	"github.com/clienttools/gateway/store/jetstream/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// rig runs engines one after another on one store's data and one clock:
// closing an engine and starting the next on the same data is a restart.
// With JetStream, the store (and its embedded server) restarts too.
type rig struct {
	t          *testing.T
	clock      *clock.Fake
	store      engine.Store
	open       func() engine.Store
	closeStore func()
	drain      time.Duration    // the next engine's Options.Drain
	metrics    *metrics.Metrics // the next engine's Options.Metrics
	replay     int              // the next engine's Options.ReplayBytes
	// unserved: the next engine's providers serve no model, as a gateway
	// restarted without a provider's key.
	unserved bool
}

// forEachStore runs f on the memory store and on JetStream in a temporary
// directory.
func forEachStore(t *testing.T, f func(t *testing.T, r *rig)) {
	forEachStoreOf(t, 0, f)
}

// forEachStoreOf is forEachStore with JetStream on a NATS server of its
// own whose max_payload is maxPayload bytes (0: the embedded server, on
// the journal's largest message), where a step passes one message with
// little data.
func forEachStoreOf(t *testing.T, maxPayload int32, f func(t *testing.T, r *rig)) {
	t.Run("memory", func(t *testing.T) {
		mem := engine.NewMemoryStore()
		f(t, &rig{t: t, clock: clock.NewFake(epoch), open: func() engine.Store { return mem }})
	})
	t.Run("jetstream", func(t *testing.T) {
		o := jetstream.Options{DataDir: t.TempDir(), Logger: quiet()}
		if maxPayload > 0 {
			o = jetstream.Options{URL: natstest.Start(t, func(so *server.Options) { so.MaxPayload = maxPayload }), Node: "n1", Logger: quiet()}
		}
		r := &rig{t: t, clock: clock.NewFake(epoch)}
		r.open = func() engine.Store {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			s, err := jetstream.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			r.closeStore = func() { _ = s.Close() }
			t.Cleanup(r.closeStore)
			return s
		}
		f(t, r)
	})
}

// start starts an engine on the rig's store, restarting the store first
// when an engine ran before (the caller stopped it).
func (r *rig) start(w *testWorker, m model.Model) *engine.Engine {
	r.t.Helper()
	if w.agent.Model == "" {
		w.agent.Model = "fake-model"
	}
	if r.closeStore != nil {
		r.closeStore()
	}
	r.store = r.open()
	resolve := func(string) (model.Model, error) { return m, nil }
	if r.unserved {
		resolve = func(id string) (model.Model, error) {
			return nil, fmt.Errorf("%w: provider not configured", model.ErrUnknownModel)
		}
	}
	e, err := engine.New(engine.Options{
		Worker: w, Models: model.ResolverFunc(resolve),
		Store: r.store, Clock: r.clock, Logger: quiet(), Retain: -1, Rand: half, Drain: r.drain, Metrics: r.metrics, ReplayBytes: r.replay,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { stop(r.t, e) })
	return e
}

// resumed starts the next engine and Resumes it: the session id must be
// among those it loads (work was in flight).
// closeDraining starts e.Close and returns its outcome's channel once Close
// has armed its Drain timer, which it does once every session was asked to
// drain: only then may the test let the work finish or time run.
func (r *rig) closeDraining(t *testing.T, e *engine.Engine) <-chan error {
	t.Helper()
	timers := r.clock.Pending()
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		closed <- e.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := r.clock.WaitPending(ctx, timers+1); err != nil {
		t.Fatalf("Close armed no Drain timer: %v", err)
	}
	return closed
}

func (r *rig) resumed(w *testWorker, m model.Model, id string) *engine.Session {
	r.t.Helper()
	e := r.start(w, m)
	if err := e.Resume(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	s, ok := e.Session(id)
	if !ok {
		r.t.Fatalf("Resume did not load session %s", id)
	}
	return s
}

// loaded starts the next engine and loads session id, as a page would.
func (r *rig) loaded(w *testWorker, m model.Model, id string) *engine.Session {
	r.t.Helper()
	s, err := r.start(w, m).Load(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func stop(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
