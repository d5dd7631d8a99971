package engine

import (
	"context"
	"log/slog"
	"testing"
)

// TestEventLogKeepsItsOwnState: the session encodes its state into a
// buffer it reuses at the next step; what the log stores and compares with
// must be its own copy.
func TestEventLogKeepsItsOwnState(t *testing.T) {
	store := NewMemoryStore()
	l := &eventLog{session: "s", store: store, logger: slog.New(slog.DiscardHandler), pages: map[*Page]struct{}{}}
	buf := []byte(`{"v":1,"n":1}`)
	l.begin()
	// As the agent's state, so the store keeps it after the next.
	if changed, err := l.commit(buf, true, false); !changed || err != nil {
		t.Fatalf("the first state: changed %v, %v", changed, err)
	}
	copy(buf, `{"v":1,"n":2}`) // the next step's state, in the same buffer
	l.begin()
	if changed, err := l.commit(buf, false, false); !changed || err != nil {
		t.Fatalf("a changed state, in the buffer of the last: changed %v, %v", changed, err)
	}
	l.begin()
	if changed, _ := l.commit([]byte(`{"v":1,"n":2}`), false, false); changed {
		t.Error("the same state again was stored")
	}
	batches, err := store.Load(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, b := range batches {
		states = append(states, string(b.State))
	}
	if len(states) != 2 || states[0] != `{"v":1,"n":1}` || states[1] != `{"v":1,"n":2}` {
		t.Errorf("stored states %q", states)
	}
}
