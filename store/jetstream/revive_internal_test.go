package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/clienttools/gateway/engine"
)

// TestJetStreamComesBackOn: a server that turned JetStream off (as a
// clustered one does when a write finds the disk full,
// ShutdownJetStream), left alone, never turns it on again. The store turns
// it back on once the disk has room, so a step the store refused meanwhile
// is stored, as storage.md promises, and the journal holds everything from
// before. A standalone server's own full disk: TestFullDisk.
func TestJetStreamComesBackOn(t *testing.T) {
	was := reviveEvery
	reviveEvery = 20 * time.Millisecond
	t.Cleanup(func() { reviveEvery = was })
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Own(ctx, "s1", func() { t.Error("lost the lease") }); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64) engine.Event {
		return engine.Event{Seq: seq, Type: "message", Frame: json.RawMessage(fmt.Sprintf(`{"type":"message","seq":%d}`, seq))}
	}
	if err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.embedded.ns.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	// The engine tries a refused step again every second, with a context
	// that never ends; each try here is bounded by the client's timeout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Append(ctx, "s1", engine.Batch{Events: []engine.Event{ev(2)}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step is still refused 30 s after JetStream went off: %v (healthy: %v)", err, s.Healthy())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy after JetStream came back on: %v", err)
	}
	if seqs := journalSeqs(t, s, "s1"); fmt.Sprint(seqs) != "[1 2]" {
		t.Errorf("the journal holds events %v, want [1 2]", seqs)
	}
}
