package jetstream

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/clienttools/gateway/engine"
)

// A released session leaves nothing behind in the store's memory: a node
// that ran many sessions holds only the ones it still owns.
func TestReleaseForgetsTheSession(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir(), Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tracked := func(session string) (owned, head bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, owned = s.owned[session]
		_, head = s.heads[session]
		return owned, head
	}
	for _, id := range []string{"s1", "s2"} {
		own, err := s.Own(ctx, id, func() {})
		if err != nil {
			t.Fatal(err)
		}
		ev := engine.Event{Seq: 1, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":1}`)}
		if err := s.Append(ctx, id, engine.Batch{Events: []engine.Event{ev}}); err != nil {
			t.Fatal(err)
		}
		if owned, head := tracked(id); !owned || !head {
			t.Fatalf("%s while owned: owned %v, head %v", id, owned, head)
		}
		if id == "s1" {
			if err := own.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if owned, head := tracked("s1"); owned || head {
		t.Errorf("s1 after Release: owned %v, head %v, want neither", owned, head)
	}
	if owned, head := tracked("s2"); !owned || !head {
		t.Errorf("s2, still owned: owned %v, head %v", owned, head)
	}
	// Taken again, it appends after what it stored before.
	if _, err := s.Own(ctx, "s1", func() {}); err != nil {
		t.Fatal(err)
	}
	ev := engine.Event{Seq: 2, Type: "message", Frame: json.RawMessage(`{"type":"message","seq":2}`)}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev}}); err != nil {
		t.Fatalf("append after owning again: %v", err)
	}
}
