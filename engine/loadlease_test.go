package engine_test

import (
	"context"
	"errors"
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
